"""A private Mosquitto broker on a free port, for tests of MQTT clients (never the shared one).

Anonymous, on loopback, with a configuration of its own in the test's directory; stopped
when the block ends. Used where a test needs a plain broker rather than the service's own.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.processes import free_port

MOSQUITTO = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
START_TIMEOUT_S = 10


@contextmanager
def private_mosquitto(workdir: Path) -> Iterator[int]:
    """Yield the port of a Mosquitto that accepts anyone on 127.0.0.1."""
    port = free_port()
    config = workdir / "mosquitto.conf"
    config.write_text(
        f"listener {port} 127.0.0.1\nallow_anonymous true\npersistence false\n"
        f"log_dest file {workdir / 'mosquitto.log'}\n",
        encoding="utf-8",
    )
    process = subprocess.Popen(
        [MOSQUITTO, "-c", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"mosquitto did not start on {port}") from None
                time.sleep(0.05)
        yield port
    finally:
        process.terminate()
        process.wait(timeout=10)
