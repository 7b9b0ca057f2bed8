"""``serve``'s side of the device link's process (``process.py``): it starts the process,
reads its first line (``ready``, or the one-line reason it cannot start), stops it, and
starts it again should it ever end unasked, so that devices are never left without a
broker. One link process, whatever the number of HTTP workers.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import signal
import subprocess
import sys
import threading
import time

from devicecontrol.devices.link.ports import LinkError
from devicecontrol.observability import metrics

__all__ = ["READY", "LinkProcess"]

READY = "ready"  # the link process's first line once it serves devices
LINK_MODULE = "devicecontrol.devices.link.process"
START_TIMEOUT_S = 30
STOP_TIMEOUT_S = 15
RESTART_DELAY_S = 1.0
logger = logging.getLogger("devicecontrol.devices.link")


class LinkProcess:
    """``serve``'s handle on the link's process, restarted should it ever end on its own."""

    def __init__(self, process: subprocess.Popen[bytes], metrics_directory: str) -> None:
        self.process = process
        self._metrics_directory = metrics_directory
        self._stopping = threading.Event()
        self._watchdog = threading.Thread(target=self._restart_when_ended, daemon=True)
        self._watchdog.start()

    @classmethod
    def start(cls, metrics_directory: str) -> LinkProcess:
        """The link, listening; ``LinkError`` with its one-line reason if it cannot."""
        return cls(_spawn(metrics_directory), metrics_directory)

    def terminate(self) -> None:
        """Ask it to stop, without waiting (safe in a signal handler)."""
        self._stopping.set()
        with contextlib.suppress(ProcessLookupError):
            self.process.send_signal(signal.SIGTERM)

    def stop(self) -> None:
        """Stop it and wait; killed if it has not finished in ``STOP_TIMEOUT_S``."""
        self.terminate()
        self._watchdog.join(timeout=STOP_TIMEOUT_S)
        self.terminate()  # the one a restart may have started meanwhile
        _end(self.process)

    def _restart_when_ended(self) -> None:
        """A link that ends unasked (a bug, the OOM killer) must not leave devices without a
        broker: it is started again, every ``RESTART_DELAY_S`` until it listens."""
        while True:
            status = self.process.wait()
            if self._stopping.is_set():
                return
            logger.error("the device link ended unexpectedly (status %s); restarting it", status)
            while not self._stopping.wait(RESTART_DELAY_S):
                try:
                    self.process = _spawn(self._metrics_directory)
                    break
                except LinkError as exc:
                    logger.error("the device link cannot restart: %s", exc)


def _spawn(metrics_directory: str) -> subprocess.Popen[bytes]:
    environment = {**os.environ, metrics.MULTIPROC_DIR_VARIABLE: metrics_directory}
    process = subprocess.Popen(  # noqa: S603 (this interpreter, this module)
        [sys.executable, "-m", LINK_MODULE],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=environment,
    )
    line = _first_line(process, START_TIMEOUT_S)
    if line == READY:
        return process
    with contextlib.suppress(ProcessLookupError):
        process.send_signal(signal.SIGTERM)
    _end(process)
    raise LinkError(line or f"the device link did not start (status {process.returncode})")


def _end(process: subprocess.Popen[bytes]) -> None:
    try:
        process.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    for pipe in (process.stdin, process.stdout):
        if pipe is not None:
            pipe.close()


def _first_line(process: subprocess.Popen[bytes], timeout_s: float) -> str:
    assert process.stdout is not None
    deadline = time.monotonic() + timeout_s
    while (remaining := deadline - time.monotonic()) > 0:
        readable, _, _ = select.select([process.stdout], [], [], remaining)
        if readable:
            return process.stdout.readline().decode("utf-8", "replace").strip()
    return f"the device link did not start within {timeout_s} s"
