"""The hot-read lane (hot_reads.py) answers exactly as Litestar does, only faster.

Two apps on one database, one with the lane and one without (``create_app(hot_reads=
False)``), get the same requests: well-formed reads, every kind of error, and the odd
requests the lane leaves to Litestar. Status, headers (but the request id), body bytes and
the request log's route and caller must be the same. The statement counts show that the
lane really answered: its controller read is one statement where Litestar's is two.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from litestar import Litestar

from devicecontrol.app import create_app
from tests.controllers.helpers import counted_statements
from tests.devices.helpers import report
from tests.factories import bearer, login, make_client, make_controller, make_user

ANA, BEN = "ana@example.com", "ben@example.com"
OTHER_TOKEN = "f" * 64


@pytest.fixture
async def lanes(settings: Any, runtime: Any) -> AsyncIterator[dict[str, Any]]:
    """Both apps, and Ana's and Ben's tokens, on a database with readings and commands."""
    hot, plain = create_app(settings), create_app(settings, hot_reads=False)
    await make_client(runtime)
    await make_user(runtime, ANA)
    await make_user(runtime, BEN)
    await make_controller(runtime, "MEL1", owner=ANA, type="melissa")
    await make_controller(runtime, "MEL2", owner=ANA, type="melissa")
    await make_controller(runtime, "PLUG1", owner=ANA, mac="AABBCC001122")
    await make_controller(runtime, "BEN1", owner=BEN, type="melissa")
    await make_controller(runtime, "FREE1")
    await report(runtime, "MEL1", {"temp": 21.5, "humidity": 40.2, "note": "ünïcode"})
    await report(runtime, "PLUG1", {"relay_state": "on", "power": [12.5]})
    async with (
        httpx.AsyncClient(transport=httpx.ASGITransport(app=hot), base_url="http://t") as fast,
        httpx.AsyncClient(transport=httpx.ASGITransport(app=plain), base_url="http://t") as slow,
    ):
        ana = bearer((await login(fast, ANA))["access_token"])
        ben = bearer((await login(fast, BEN))["access_token"])
        send = {"serial_number": "MEL1", "command": "send_ir_code"}
        settings_sent = {**send, "state": 1, "mode": 2, "temp": 23, "fan": 1}
        response = await fast.post("/v1/provider/send", json=settings_sent, headers=ana)
        assert response.status_code == 200, response.text
        yield {"apps": (hot, plain), "clients": (fast, slow), "ana": ana, "ben": ben}
    await hot.state.runtime.close()
    await plain.state.runtime.close()


def _requests(ana: dict[str, str], ben: dict[str, str]) -> list[tuple[str, str, dict, Any]]:
    """(method, path, headers, body) of every request both lanes must answer alike."""
    gzip_ok = {"Accept-Encoding": "gzip, deflate"}
    json_type = {"Content-Type": "application/json"}
    requests: list[tuple[str, str, dict, Any]] = []
    ana_json = {**ana, **json_type}
    for prefix in ("/v1", ""):
        fetch = f"{prefix}/provider/fetch"
        requests += [
            ("GET", f"{prefix}/controllers/MEL1", ana, None),
            ("GET", f"{prefix}/controllers/MEL2", ana, None),  # no command yet
            ("GET", f"{prefix}/controllers/PLUG1", {**ana, **gzip_ok}, None),
            ("GET", f"{prefix}/controllers/BEN1", ana, None),  # someone else's
            ("GET", f"{prefix}/controllers/FREE1", ana, None),  # nobody's
            ("GET", f"{prefix}/controllers/NOPE", ana, None),
            ("GET", f"{prefix}/controllers/bad!serial", ana, None),
            ("GET", f"{prefix}/controllers/MEL1", {}, None),
            ("GET", f"{prefix}/controllers/MEL1", {"Authorization": "Basic eDp5"}, None),
            ("GET", f"{prefix}/controllers/MEL1", bearer(OTHER_TOKEN), None),
            ("GET", f"{prefix}/controllers/MEL1", bearer("short"), None),
            ("GET", f"{prefix}/controllers/BEN1", ben, None),
            ("HEAD", f"{prefix}/controllers/MEL1", ana, None),
            ("DELETE", f"{prefix}/users/me", ana, None),
            ("GET", f"{prefix}/controllers", ana, None),
            ("GET", f"{prefix}/controllers/", ana, None),
            ("GET", f"{prefix}/controllers", {**ana, **gzip_ok}, None),
            ("GET", f"{prefix}/controllers?page=2&page_size=1", ana, None),
            ("GET", f"{prefix}/controllers?page_size=2&type=melissa", ana, None),
            ("GET", f"{prefix}/controllers?mac=aa-bb-cc-00-11-22", ana, None),
            ("GET", f"{prefix}/controllers?page=9", ana, None),
            ("GET", f"{prefix}/controllers?page=0", ana, None),
            ("GET", f"{prefix}/controllers?page=abc", ana, None),
            ("GET", f"{prefix}/controllers?page=", ana, None),
            ("GET", f"{prefix}/controllers?page=1&page=2", ana, None),
            ("GET", f"{prefix}/controllers?page_size=501", ana, None),
            ("GET", f"{prefix}/controllers?mac=zz", ana, None),
            ("GET", f"{prefix}/controllers?type=%00", ana, None),
            ("GET", f"{prefix}/controllers?type=" + "x" * 65, ana, None),
            ("GET", f"{prefix}/controllers?unknown=1&page=1", ana, None),
            ("GET", f"{prefix}/controllers", bearer(OTHER_TOKEN), None),
            ("GET", f"{prefix}/users/me", ana, None),
            ("GET", f"{prefix}/users/me", {**ana, "Accept-Response": "Advanced"}, None),
            ("GET", f"{prefix}/users/me", {**ana, "Accept-Response": " advanced "}, None),
            ("GET", f"{prefix}/users/me", {}, None),
            ("POST", fetch, ana_json, b'{"serial_number":"MEL1"}'),
            (
                "POST",
                f"{prefix}/provider/fetch",
                {**ana, **json_type},
                b'{"serial_number":"PLUG1"}',
            ),
            ("POST", fetch, ana_json, b'{"serial_number":"BEN1"}'),
            ("POST", fetch, ana_json, b'{"serial_number":1}'),
            ("POST", fetch, ana_json, b"{}"),
            ("POST", fetch, ana_json, b"[1]"),
            ("POST", fetch, ana_json, b"{nope"),
            ("POST", fetch, ana_json, b'{"a":1,"a":2}'),
            ("POST", fetch, ana, b'{"serial_number":"MEL1"}'),
            ("POST", fetch, {**ana, "Content-Type": "text/plain"}, b"x"),
            ("POST", fetch, ana_json, b" " * 70_000),
            ("POST", fetch, {**json_type}, b'{"serial_number":"MEL1"}'),
        ]
    requests.append(("GET", "/v1/controllers/MEL1%2Fassign", ana, None))
    return requests


def _answer(response: httpx.Response) -> tuple[int, list[tuple[str, str]], bytes]:
    """Status, headers but the request id, and the body (httpx unzips it: gzip stamps a
    time in its header, so zipped bytes may differ by the second)."""
    headers = [(n, v) for n, v in response.headers.multi_items() if n != "x-request-id"]
    # Litestar lists the allowed methods in no fixed order, in either lane
    headers = [(n, ", ".join(sorted(v.split(", "))) if n == "allow" else v) for n, v in headers]
    return response.status_code, headers, response.content


async def _send(client: httpx.AsyncClient, request: tuple[str, str, dict, Any]) -> httpx.Response:
    method, path, headers, body = request
    return await client.request(method, path, headers=headers, content=body)


async def test_both_lanes_give_the_same_answers_and_log_lines(lanes, caplog) -> None:
    caplog.set_level(logging.INFO, logger="devicecontrol")
    fast, slow = lanes["clients"]
    for request in _requests(lanes["ana"], lanes["ben"]):
        caplog.clear()
        fast_response = await _send(fast, request)
        slow_response = await _send(slow, request)
        assert _answer(fast_response) == _answer(slow_response), request
        assert fast_response.status_code < 500, (request, fast_response.text)
        lines = [r.fields for r in caplog.records if r.name == "devicecontrol.access"]
        assert len(lines) == 2, request
        for field in ("route", "status", "user_id", "method"):
            assert lines[0][field] == lines[1][field], (request, field)


async def test_the_gzip_answers_are_compressed_alike(lanes, runtime) -> None:
    for number in range(10):  # a page over the 1 KiB the middleware compresses from
        await make_controller(runtime, f"MORE{number}", owner=ANA)
    fast, slow = lanes["clients"]
    headers = {**lanes["ana"], "Accept-Encoding": "gzip"}
    fast_response = await fast.get("/v1/controllers", headers=headers)
    slow_response = await slow.get("/v1/controllers", headers=headers)
    for response in (fast_response, slow_response):
        assert response.headers["content-encoding"] == "gzip"
        assert response.headers["vary"] == "Accept-Encoding"
    assert fast_response.json() == slow_response.json()


async def test_the_lane_answers_a_read_in_one_statement_and_litestar_in_two(lanes) -> None:
    """With the token cache off every read checks its token: the lane does it in the same
    statement as the read (one round trip on PostgreSQL)."""
    hot, plain = lanes["apps"]
    fast, slow = lanes["clients"]
    hot.state.runtime.token_cache.enabled = plain.state.runtime.token_cache.enabled = False
    for client, app, expected in ((fast, hot, 1), (slow, plain, 2)):
        with counted_statements(app.state.runtime.database) as statements:
            response = await client.get("/v1/controllers/MEL1", headers=lanes["ana"])
        assert response.status_code == 200
        assert len(statements) == expected, statements
    with counted_statements(hot.state.runtime.database) as statements:
        response = await fast.get("/v1/controllers/BEN1", headers=lanes["ana"])
    assert response.status_code == 404
    assert len(statements) == 3, statements  # the lane's one, then Litestar's two


async def test_a_token_in_the_cache_costs_the_read_alone(lanes) -> None:
    hot: Litestar = lanes["apps"][0]
    fast = lanes["clients"][0]
    await fast.get("/v1/controllers/MEL1", headers=lanes["ana"])  # now in the cache
    with counted_statements(hot.state.runtime.database) as statements:
        response = await fast.get("/v1/controllers/MEL1", headers=lanes["ana"])
    assert response.status_code == 200
    assert len(statements) == 1
    assert "access_tokens" not in statements[0]


async def _asgi_post(app: Litestar, path: str, headers: dict[str, str], body: bytes) -> int:
    """POST through the app as uvicorn would drive it: after the body, ``receive`` waits
    until the client goes away (httpx's test transport says "disconnected" at once)."""
    statuses = []
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()  # no more messages: only a disconnect would come
        raise AssertionError("unreachable")

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])

    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
        "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"",
        "root_path": "", "client": ("127.0.0.1", 5000), "server": ("127.0.0.1", 8000),
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
    }  # fmt: skip
    await asyncio.wait_for(app(scope, receive, send), timeout=5)
    return statuses[0]


@pytest.mark.parametrize("body", [b"", b"{}", b'{"serial_number":"BEN1"}'])
async def test_a_body_the_lane_read_is_read_again_by_litestar(lanes, body) -> None:
    """An error after the lane read the body (here: none, no serial number, not yours) is
    Litestar's to answer, and Litestar must get the body again, not wait for it."""
    hot = lanes["apps"][0]
    headers = {**lanes["ana"], "Content-Type": "application/json"}
    status = await _asgi_post(hot, "/v1/provider/fetch", headers, body)
    assert status == (404 if body.startswith(b'{"serial') else 400)
