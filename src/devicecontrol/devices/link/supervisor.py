"""``serve``'s side of its helper processes, the device link (``process.py``) and the
broker hook (``hook/process.py``): it starts one, reads its first line (``ready``, or the
one-line reason it cannot start), stops it, and starts it again should it ever end
unasked, so that devices are never left without a broker nor a broker without its answers.
One of each, whatever the number of HTTP workers.
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

__all__ = ["HOOK_MODULE", "LINK_MODULE", "READY", "HelperProcess"]

READY = "ready"  # the link process's first line once it serves devices
LINK_MODULE = "devicecontrol.devices.link.process"
HOOK_MODULE = "devicecontrol.devices.hook.process"
# what the log calls each
NAMES = {LINK_MODULE: "the device link", HOOK_MODULE: "the broker hook"}
START_TIMEOUT_S = 30
STOP_TIMEOUT_S = 15
RESTART_DELAY_S = 1.0
logger = logging.getLogger("devicecontrol.devices.link")


class HelperProcess:
    """``serve``'s handle on a helper process (the link's, or the hook's), restarted should
    it ever end on its own."""

    def __init__(
        self, process: subprocess.Popen[bytes], metrics_directory: str, module: str
    ) -> None:
        self.process = process
        self._metrics_directory = metrics_directory
        self._module = module
        self._stopping = threading.Event()
        self._watchdog = threading.Thread(target=self._restart_when_ended, daemon=True)
        self._watchdog.start()

    @classmethod
    def start(cls, metrics_directory: str, module: str = LINK_MODULE) -> HelperProcess:
        """The process, listening; ``LinkError`` with its one-line reason if it cannot."""
        return cls(_spawn(metrics_directory, module), metrics_directory, module)

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
            logger.error(
                "%s ended unexpectedly (status %s); restarting it", NAMES[self._module], status
            )
            while not self._stopping.wait(RESTART_DELAY_S):
                try:
                    self.process = _spawn(self._metrics_directory, self._module)
                    break
                except LinkError as exc:
                    logger.error("%s cannot restart: %s", NAMES[self._module], exc)


def _spawn(metrics_directory: str, module: str) -> subprocess.Popen[bytes]:
    environment = {**os.environ, metrics.MULTIPROC_DIR_VARIABLE: metrics_directory}
    process = subprocess.Popen(  # noqa: S603 (this interpreter, our own module)
        [sys.executable, "-m", module],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=environment,
    )
    line = _first_line(process, module, START_TIMEOUT_S)
    if line == READY:
        return process
    with contextlib.suppress(ProcessLookupError):
        process.send_signal(signal.SIGTERM)
    _end(process)
    raise LinkError(line or f"{NAMES[module]} did not start (status {process.returncode})")


def _end(process: subprocess.Popen[bytes]) -> None:
    try:
        process.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    for pipe in (process.stdin, process.stdout):
        if pipe is not None:
            pipe.close()


def _first_line(process: subprocess.Popen[bytes], module: str, timeout_s: float) -> str:
    assert process.stdout is not None
    deadline = time.monotonic() + timeout_s
    while (remaining := deadline - time.monotonic()) > 0:
        readable, _, _ = select.select([process.stdout], [], [], remaining)
        if readable:
            return process.stdout.readline().decode("utf-8", "replace").strip()
    return f"{NAMES[module]} did not start within {timeout_s} s"
