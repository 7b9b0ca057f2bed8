"""The device link's composition root and process: settings -> broker adapter -> link
(``build_link``), run in a process of its own that ``serve`` starts and supervises: one
broker, whatever the number of HTTP workers (``python -m devicecontrol.devices.link.process``).

``serve`` starts it once the migrations have run and before uvicorn listens, and reads
its first line on stdout: ``ready``, or the one-line reason it cannot start (a taken
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
import contextlib
import gc
import logging
import logging.config
import os
import select
import signal
import subprocess
import sys
import threading
import time

from devicecontrol.config import Settings, SettingsError, load_settings
from devicecontrol.devices.link.core import DeviceLink
from devicecontrol.devices.link.endpoint.broker import DeviceEndpoint
from devicecontrol.devices.link.mosquitto.client import MosquittoBroker
from devicecontrol.devices.link.ports import Broker, LinkError
from devicecontrol.observability import metrics
from devicecontrol.observability.logs import link_logging_config
from devicecontrol.runtime import Runtime

READY = "ready"
# the cyclic collector's thresholds in the link (the defaults are 700, 10, 10): see
# ``collect_garbage_for_a_fleet``
YOUNG_COLLECTION_EVERY = 5_000
MIDDLE_COLLECTION_EVERY = 20
FULL_COLLECTION_EVERY = 100
START_TIMEOUT_S = 30
STOP_TIMEOUT_S = 15
RESTART_DELAY_S = 1.0
logger = logging.getLogger("devicecontrol.devices.link")


def build_link(runtime: Runtime, *, listen: str | None = None) -> DeviceLink:
    """The link with its broker: the device endpoint on ``listen`` (else the setting), or,
    when the settings name ``DEVICECONTROL_MQTT_URL`` and no ``listen`` is given, a client
    of that Mosquitto broker. The one place that knows the adapters."""
    settings = runtime.settings
    mqtt_url = settings.mqtt_url

    def make_broker(link: DeviceLink) -> Broker:
        if mqtt_url is not None and listen is None:
            return MosquittoBroker(link, mqtt_url, ca_file=settings.mqtt_ca)
        return DeviceEndpoint(link, listen or settings.mqtt_listen, settings)

    return DeviceLink(runtime, make_broker)


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
        [sys.executable, "-m", __name__],
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


# --- the link's process -------------------------------------------------------------------


def _say(line: str) -> None:
    sys.stdout.write(" ".join(line.split()) + "\n")
    sys.stdout.flush()


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
            _say(str(exc))
            return 1
        except Exception as exc:  # the database, most likely
            reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            _say(f"the device link cannot start: {reason}")
            return 1
        _say(READY)
        # nobody reads stdout any more: a stray print must not fill the pipe and block
        os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
        await _until_stopped()
        await link.stop()
        return 0
    finally:
        await runtime.close()
        metrics.mark_this_process_dead()


def collect_garbage_for_a_fleet() -> None:
    """Fewer, shorter pauses of the cyclic garbage collector.

    Why: 10,000 connected devices are about a million long-lived objects, and with the
    default thresholds every reading's short-lived objects (its packet, future, batch row)
    reached the oldest generation within milliseconds, so that a full collection ran every
    few seconds and stopped the link for 150 ms on SQLite and 300 to 370 ms on PostgreSQL
    (traced at 1,000 readings/s): the PUBACK and command round trip p99. With a young
    generation of 5,000 objects such objects die young, and a full collection needs ten
    times as many middle-aged ones. What the process holds when it starts (modules,
    settings) is frozen out of every collection.
    """
    gc.freeze()
    gc.set_threshold(YOUNG_COLLECTION_EVERY, MIDDLE_COLLECTION_EVERY, FULL_COLLECTION_EVERY)


def main() -> int:
    try:
        settings = load_settings()
    except SettingsError as exc:
        _say(str(exc))
        return 1
    logging.config.dictConfig(link_logging_config(settings.log_level, settings.log_format))
    collect_garbage_for_a_fleet()
    return asyncio.run(_run(settings))


if __name__ == "__main__":
    sys.exit(main())
