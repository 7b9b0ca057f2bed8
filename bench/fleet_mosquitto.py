"""Mosquitto with a fleet's accounts, for ``python -m bench.devices --broker mosquitto``.

Mosquitto 2.0.11's dynamic security rewrites its whole file after every command, so that
10,000 devices created through ``$CONTROL`` (what ``controllers import`` does) take tens
of minutes (docs/OPERATIONS.md). The bench writes the file before the broker starts
instead: ``mosquitto_ctrl dynsec init`` for its administrator, then the service's user and
one client and role per device, as ``dynsec.py`` would have made them (the same rules,
``device_acls``; passwords as the plugin stores them: PBKDF2-SHA512, 101 iterations, a
12-byte salt). The broker's settings are the ones docs/OPERATIONS.md gives
(``tests/mosquitto.py``).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from devicecontrol.devices.link.mosquitto.dynsec import device_acls, role_name
from tests.mosquitto import (
    ADMIN,
    ADMIN_PASSWORD,
    DYNSEC_PLUGIN,
    MOSQUITTO,
    MOSQUITTO_CTRL,
    SERVICE_ACLS,
    SERVICE_BROKER_SETTINGS,
    SERVICE_PASSWORD,
    SERVICE_ROLE,
    SERVICE_USER,
    wait_for_port,
)

ITERATIONS = 101  # the plugin's own default
SALT_BYTES = 12


@dataclass(frozen=True)
class FleetBroker:
    port: int

    @property
    def url(self) -> str:
        """DEVICECONTROL_MQTT_URL for the service's user."""
        return f"mqtt://{SERVICE_USER}:{SERVICE_PASSWORD}@127.0.0.1:{self.port}"


def stored_password(password: str) -> dict[str, object]:
    salt = os.urandom(SALT_BYTES)
    digest = hashlib.pbkdf2_hmac("sha512", password.encode(), salt, ITERATIONS)
    return {
        "password": base64.b64encode(digest).decode(),
        "salt": base64.b64encode(salt).decode(),
        "iterations": ITERATIONS,
    }


def fleet_file(path: Path, serials: Sequence[str], secret: str) -> None:
    """A dynamic-security file with the administrator, the service and every device."""
    subprocess.run(  # noqa: S603 (Debian's mosquitto_ctrl, fixed arguments)
        [MOSQUITTO_CTRL, "dynsec", "init", str(path), ADMIN, ADMIN_PASSWORD],
        capture_output=True, timeout=30, check=True,
    )  # fmt: skip
    config = json.loads(path.read_text(encoding="utf-8"))
    service_acls = [
        {"acltype": acl_type, "topic": topic, "allow": True} for acl_type, topic in SERVICE_ACLS
    ]
    config["roles"].append({"rolename": SERVICE_ROLE, "acls": service_acls})
    config["clients"].append(
        {"username": SERVICE_USER, "roles": [{"rolename": SERVICE_ROLE}],
         **stored_password(SERVICE_PASSWORD)}
    )  # fmt: skip
    device_password = stored_password(secret)  # one secret for the whole bench fleet
    for serial_number in serials:
        role = role_name(serial_number)
        config["roles"].append({"rolename": role, "acls": device_acls(serial_number)})
        config["clients"].append(
            {"username": serial_number, "clientid": serial_number,
             "roles": [{"rolename": role}], **device_password}
        )  # fmt: skip
    path.write_text(json.dumps(config), encoding="utf-8")


@contextlib.contextmanager
def fleet_mosquitto(
    workdir: Path, port: int, serials: Sequence[str], secret: str
) -> Iterator[FleetBroker]:
    """Mosquitto on ``port`` with the fleet's accounts, stopped when the block ends."""
    dynsec_file = workdir / "dynamic-security.json"
    fleet_file(dynsec_file, serials, secret)
    run_as = "user root\n" if os.geteuid() == 0 else ""
    config = workdir / "mosquitto.conf"
    config.write_text(
        f"listener {port} 127.0.0.1\n{SERVICE_BROKER_SETTINGS}"
        f"plugin {DYNSEC_PLUGIN}\nplugin_opt_config_file {dynsec_file}\n"
        f"persistence false\n{run_as}",
        encoding="utf-8",
    )
    process = subprocess.Popen(  # noqa: S603 (Debian's mosquitto, our configuration)
        [MOSQUITTO, "-c", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        wait_for_port(process, port)
        yield FleetBroker(port)
    finally:
        process.terminate()
        process.wait(timeout=30)
