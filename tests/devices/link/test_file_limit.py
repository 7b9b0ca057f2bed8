"""The endpoint's count of device sockets against the open files limit (file_limit.py);
the limit met by a real ``serve`` is test_serve.py's."""

from __future__ import annotations

import asyncio
import logging
import resource

from devicecontrol.devices.link.endpoint import file_limit
from devicecontrol.devices.link.endpoint.file_limit import (
    RESERVED_FILES,
    ConnectionGate,
    device_capacity,
    raise_soft_limit,
)
from tests.devices.link.support import metric


def refused() -> float:
    return metric("devicecontrol_device_connections_closed_total", reason=file_limit.REASON)


def test_the_capacity_leaves_the_link_its_reserve():
    assert device_capacity(20_000) == 20_000 - RESERVED_FILES
    assert device_capacity(RESERVED_FILES // 2) == 0


def test_the_soft_limit_is_raised_to_the_hard_one():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(256, hard), hard))
        assert raise_soft_limit() == hard
        assert resource.getrlimit(resource.RLIMIT_NOFILE) == (hard, hard)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_one_past_the_capacity_is_refused_counted_and_the_episode_logged_once(caplog):
    caplog.set_level(logging.WARNING, "devicecontrol.devices.link")
    gate = ConnectionGate(2)
    before = refused()
    assert gate.admit() and gate.admit()
    assert not gate.admit() and not gate.admit()
    assert refused() == before + 2
    gate.release()
    assert gate.admit()
    logged = [record.fields for record in caplog.records]  # type: ignore[attr-defined]
    assert [line["event"] for line in logged] == [
        "device_connections_at_file_limit",
        "device_connections_below_file_limit",
    ]
    assert logged[1]["refused"] == 2


async def test_asyncio_pausing_accept_for_want_of_files_is_a_refusal_not_a_traceback(caplog):
    loop = asyncio.get_running_loop()
    seen: list[str] = []
    loop.set_exception_handler(lambda _loop, context: seen.append(context["message"]))
    try:
        gate = ConnectionGate(5)
        gate.watch_accept_failures(loop)
        before = refused()
        error = OSError(24, "Too many open files")
        loop.call_exception_handler(
            {"message": "socket.accept() out of system resource", "exception": error}
        )
        loop.call_exception_handler({"message": "something else"})
        assert refused() == before + 1
        assert seen == ["something else"]  # the rest goes to the handler set before
    finally:
        loop.set_exception_handler(None)
