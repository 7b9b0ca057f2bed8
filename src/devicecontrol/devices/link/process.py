"""The device link's own process (``python -m devicecontrol.devices.link.process``), which
``serve`` starts and supervises (``supervisor.py``) once the migrations have run and before
uvicorn listens.

Its first line on stdout is ``ready``, or the one-line reason it cannot start (a taken
port, unusable TLS files, an external broker out of reach or refusing). SIGTERM or SIGINT
stop it cleanly, exit 0: the embedded broker's device connections closed and the devices
offline; an external broker's devices stay connected to it (and online). Its stdin is a
lifeline: should ``serve`` die without stopping it, the pipe closes and the link stops as
well, freeing the port.

It reads its settings from the environment, as uvicorn's workers do, and writes its
metrics to the directory ``serve`` names in ``PROMETHEUS_MULTIPROC_DIR``.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys

from devicecontrol.config import Settings
from devicecontrol.devices.link.compose import build_link
from devicecontrol.devices.link.helper_process import run_helper, say
from devicecontrol.devices.link.ports import LinkError
from devicecontrol.devices.link.supervisor import READY
from devicecontrol.observability import metrics
from devicecontrol.runtime import Runtime


async def _until_stopped() -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)

    def parent_gone() -> None:
        if not os.read(sys.stdin.fileno(), 4096):  # end of file: serve is gone
            loop.remove_reader(sys.stdin.fileno())
            stop.set()

    loop.add_reader(sys.stdin.fileno(), parent_gone)
    await stop.wait()


async def _run(settings: Settings) -> int:
    runtime = Runtime.from_settings(settings)
    link = build_link(runtime)
    try:
        try:
            await link.start()
        except LinkError as exc:
            say(str(exc))
            return 1
        except Exception as exc:  # the database, most likely
            reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            say(f"the device link cannot start: {reason}")
            return 1
        say(READY)
        # nobody reads stdout any more: a stray print must not fill the pipe and block
        os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
        await _until_stopped()
        await link.stop()
        return 0
    finally:
        await runtime.close()
        metrics.mark_this_process_dead()


def main() -> int:
    # 10,000 connections are a million long-lived objects: run_helper sets the collector
    return run_helper(_run)


if __name__ == "__main__":
    sys.exit(main())
