"""uvicorn, run so that SIGTERM is a clean stop: refuse new connections, let the requests in
flight finish (for at most the graceful timeout), then exit with status 0.

Plain ``uvicorn.run`` falls short of that in two ways an operator notices. With several
workers the parent keeps its copy of the listening socket open while the workers drain, so
new connections are accepted by the kernel and then left unanswered instead of refused,
and a proxy cannot move them to another process. With one process, uvicorn re-raises
SIGTERM once it has drained, so the process ends by the signal (status 143), not with 0.
"""

from __future__ import annotations

import contextlib
import signal
import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

import uvicorn
from uvicorn.config import STARTUP_FAILURE
from uvicorn.supervisors import Multiprocess

# how long requests in flight get after SIGTERM; then they are cancelled and the process
# exits. Above the proxy's read timeout is pointless; keep it below systemd's
# TimeoutStopSec (90 s by default), or the stop ends with SIGKILL instead
GRACEFUL_TIMEOUT_S = 30


class _DrainingMultiprocess(Multiprocess):
    """Closes the parent's listening socket before it asks the workers to drain."""

    on_stop: Callable[[], None] | None = None

    def terminate_all(self) -> None:
        if self.on_stop is not None:
            self.on_stop()
        for sock in self.sockets:
            sock.close()
        super().terminate_all()


class _Server(uvicorn.Server):
    """Tells ``on_stop`` as soon as a signal starts the drain."""

    on_stop: Callable[[], None] | None = None

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self.on_stop is not None:
            self.on_stop()
        super().handle_exit(sig, frame)


def _exit_cleanly(_signum: int, _frame: FrameType | None) -> None:
    raise SystemExit(0)


def run_uvicorn(app: str, *, on_stop: Callable[[], None] | None = None, **options: Any) -> None:
    """``uvicorn.run(app, **options)`` with the stop described above; ``app`` is an import path.

    ``on_stop`` is called (from the signal handler: it must not block) when the stop
    begins, so that what runs beside the HTTP server (the device link) stops alongside.
    """
    config = uvicorn.Config(app, **options)
    if config.workers > 1:
        supervisor = _DrainingMultiprocess(config, sockets=[config.bind_socket()])
        supervisor.on_stop = on_stop
        supervisor.run()
        return
    server = _Server(config)
    server.on_stop = on_stop
    # uvicorn restores this handler after draining and then raises SIGTERM again into it
    signal.signal(signal.SIGTERM, _exit_cleanly)
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C: drained already, as for SIGTERM
        server.run()
    if not server.started:
        sys.exit(STARTUP_FAILURE)
