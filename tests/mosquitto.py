"""Private Mosquitto brokers on free ports, for tests of MQTT clients (never the shared one).

``private_mosquitto``: anonymous, on loopback, with a configuration of its own in the test's
directory; stopped when the block ends. Used where a test needs a plain broker rather than
the service's own. ``dynsec_mosquitto``: the external broker of ``DEVICECONTROL_MQTT_URL``,
with the dynamic-security plugin and the settings docs/OPERATIONS.md gives.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.processes import free_port
from tests.tls import ServerCertificate

MOSQUITTO = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
START_TIMEOUT_S = 10


@dataclass
class Mosquitto:
    """A private Mosquitto run from ``workdir/mosquitto.conf``; ``stop`` and ``start`` restart
    it on the same port (the devices' and the link's connections end, as in a real restart)."""

    workdir: Path
    port: int
    process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            [MOSQUITTO, "-c", str(self.workdir / "mosquitto.conf")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for_port(self.process, self.port)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)


@contextmanager
def private_mosquitto(workdir: Path) -> Iterator[Mosquitto]:
    """Yield a Mosquitto that accepts anyone on 127.0.0.1 (``.port``)."""
    broker = Mosquitto(workdir, free_port())
    (workdir / "mosquitto.conf").write_text(
        f"listener {broker.port} 127.0.0.1\nallow_anonymous true\npersistence false\n"
        f"log_dest file {workdir / 'mosquitto.log'}\n",
        encoding="utf-8",
    )
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


# --- Mosquitto as the service's external broker (DEVICECONTROL_MQTT_URL) -------------------

MOSQUITTO_CTRL = shutil.which("mosquitto_ctrl") or "/usr/bin/mosquitto_ctrl"
DYNSEC_PLUGIN = "/usr/lib/x86_64-linux-gnu/mosquitto_dynamic_security.so"
ADMIN, ADMIN_PASSWORD = "admin", "admin-password-for-tests"
SERVICE_USER, SERVICE_PASSWORD = "devicecontrol", "service-password-for-tests"
SERVICE_ROLE = "devicecontrol-service"
# the service user's rights, exactly as docs/OPERATIONS.md gives them to mosquitto_ctrl
SERVICE_ACLS = (
    ("subscribePattern", "$SYS/broker/log/#"),
    ("publishClientReceive", "$SYS/broker/log/#"),
    ("subscribePattern", "devices/+/state"),
    ("subscribePattern", "devices/+/commands/result"),
    ("subscribePattern", "$share/devicecontrol/devices/+/state"),
    ("subscribePattern", "$share/devicecontrol/devices/+/commands/result"),
    ("publishClientReceive", "devices/+/state"),
    ("publishClientReceive", "devices/+/commands/result"),
    ("publishClientSend", "devices/+/commands"),
    ("publishClientSend", "$CONTROL/dynamic-security/v1"),
    ("subscribeLiteral", "$CONTROL/dynamic-security/v1/response"),
    ("publishClientReceive", "$CONTROL/dynamic-security/v1/response"),
)
# the broker settings docs/OPERATIONS.md asks for, beside the listener and the plugin
SERVICE_BROKER_SETTINGS = """\
allow_anonymous false
per_listener_settings false
log_dest topic
log_type error
log_type warning
log_type notice
log_type subscribe
log_type unsubscribe
connection_messages true
max_inflight_messages 0
max_queued_messages 0
queue_qos0_messages true
"""


class DynsecMosquitto(Mosquitto):
    """A private Mosquitto with the dynamic-security plugin, set up as OPERATIONS.md says."""

    ca: Path | None = None  # its listener speaks TLS only, with a certificate of this CA

    @property
    def url(self) -> str:
        """DEVICECONTROL_MQTT_URL for the service's user."""
        scheme = "mqtts" if self.ca is not None else "mqtt"
        return f"{scheme}://{SERVICE_USER}:{SERVICE_PASSWORD}@127.0.0.1:{self.port}"

    def ctrl(self, *args: str) -> str:
        """``mosquitto_ctrl dynsec ARGS`` as the broker's administrator."""
        result = subprocess.run(
            [MOSQUITTO_CTRL, "-h", "127.0.0.1", "-p", str(self.port), "-u", ADMIN,
             "-P", ADMIN_PASSWORD,
             *(["--cafile", str(self.ca)] if self.ca is not None else []), "dynsec", *args],
            capture_output=True, text=True, timeout=30, check=False,
        )  # fmt: skip
        assert result.returncode == 0, f"mosquitto_ctrl {args}: {result.stdout}{result.stderr}"
        return result.stdout


def wait_for_port(process: subprocess.Popen[bytes], port: int) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"mosquitto did not start on {port}") from None
            time.sleep(0.05)


@contextmanager
def dynsec_mosquitto(
    workdir: Path, tls: ServerCertificate | None = None
) -> Iterator[DynsecMosquitto]:
    """Yield a Mosquitto 2 on a free port with dynamic security, its log on $SYS topics and
    the service's user (``DynsecMosquitto.url``); persistent, so that it can be restarted.
    With ``tls``, its listener speaks TLS only, with that certificate."""
    workdir.mkdir(parents=True, exist_ok=True)
    dynsec_file = workdir / "dynamic-security.json"
    subprocess.run(
        [MOSQUITTO_CTRL, "dynsec", "init", str(dynsec_file), ADMIN, ADMIN_PASSWORD],
        capture_output=True, timeout=30, check=True,
    )  # fmt: skip
    broker = DynsecMosquitto(workdir, free_port())
    broker.ca = tls.ca if tls is not None else None
    # run as root (CI's user), Mosquitto would switch to "mosquitto", who cannot write here
    run_as = "user root\n" if os.geteuid() == 0 else ""
    tls_lines = (
        f"cafile {tls.ca}\ncertfile {tls.cert}\nkeyfile {tls.key}\n" if tls is not None else ""
    )
    (workdir / "mosquitto.conf").write_text(
        f"listener {broker.port} 127.0.0.1\n{tls_lines}{SERVICE_BROKER_SETTINGS}"
        f"plugin {DYNSEC_PLUGIN}\nplugin_opt_config_file {dynsec_file}\n"
        f"persistence true\npersistence_location {workdir}/\n{run_as}"
        f"log_dest file {workdir / 'mosquitto.log'}\n",
        encoding="utf-8",
    )
    broker.start()
    try:
        broker.ctrl("createRole", SERVICE_ROLE)
        for acl_type, topic in SERVICE_ACLS:
            broker.ctrl("addRoleACL", SERVICE_ROLE, acl_type, topic, "allow")
        broker.ctrl("createClient", SERVICE_USER, "-p", SERVICE_PASSWORD)
        broker.ctrl("addClientRole", SERVICE_USER, SERVICE_ROLE)
        yield broker
    finally:
        broker.stop()
