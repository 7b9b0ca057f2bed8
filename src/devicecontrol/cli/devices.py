"""devicecontrol devices simulate: simulated devices against the broker, for demos and load."""

from __future__ import annotations

import asyncio
import contextlib
import csv
from pathlib import Path

import click

from devicecontrol.cli.core import OperatorError
from devicecontrol.config import SettingsError, load_settings
from devicecontrol.demo import data as demo_data
from devicecontrol.devices.simulator import DeviceCredentials, simulate

GENERIC_TYPE = "generic"


@click.group()
def devices() -> None:
    """The device side: simulated devices."""


def broker_address(listen: str) -> tuple[str, int]:
    """Where to connect for a listen address: a wildcard host means this machine."""
    host, _, port = listen.rpartition(":")
    host = host.strip("[]")
    return ("127.0.0.1" if host in ("0.0.0.0", "", "::") else host), int(port)  # noqa: S104


def read_secrets(path: Path) -> list[DeviceCredentials]:
    """serial_number and device_secret columns (type optional) of a CSV file."""
    try:
        with path.open(newline="", encoding="utf-8") as file:
            rows = list(csv.DictReader(file))
    except OSError as exc:
        raise OperatorError(f"{path}: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, csv.Error) as exc:
        raise OperatorError(f"{path}: not a UTF-8 CSV file ({exc})") from None
    devices = []
    for line, row in enumerate(rows, start=2):
        serial, secret = (row.get("serial_number") or "").strip(), row.get("device_secret") or ""
        if not serial or not secret:
            raise OperatorError(f"{path} line {line}: serial_number and device_secret are needed")
        devices.append(DeviceCredentials(serial, secret, (row.get("type") or GENERIC_TYPE).strip()))
    if not devices:
        raise OperatorError(f"{path}: no devices in the file")
    return devices


@devices.command("simulate")
@click.option("--demo", "use_demo", is_flag=True, help="The demo's controllers.")
@click.option("--secrets", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="A CSV of serial_number, device_secret and (optional) type.")  # fmt: skip
@click.option("--broker", default=None, metavar="HOST:PORT",
              help="[default: DEVICECONTROL_MQTT_LISTEN, else 127.0.0.1:1884]")  # fmt: skip
@click.option("--interval", default=10.0, show_default=True, type=click.FloatRange(0.1, 3600),
              help="Seconds between a device's readings.")  # fmt: skip
def simulate_command(
    use_demo: bool, secrets: Path | None, broker: str | None, interval: float
) -> None:
    """Real MQTT clients that report readings of their type and carry out commands."""
    if use_demo == (secrets is not None):
        raise OperatorError("give exactly one of --demo and --secrets FILE.csv")
    try:
        listen = broker or load_settings().mqtt_listen
    except SettingsError as exc:
        raise OperatorError(str(exc)) from None
    if use_demo:
        devices = [
            DeviceCredentials(spec.serial_number, demo_data.DEMO_DEVICE_SECRETS[spec.serial_number],
                              spec.type)
            for spec in demo_data.SIMULATED
        ]  # fmt: skip
    else:
        assert secrets is not None
        devices = read_secrets(secrets)
    try:
        host, port = broker_address(listen)
    except ValueError:
        raise OperatorError(f"--broker must be HOST:PORT, got {broker!r}") from None
    click.echo(f"{len(devices)} simulated devices -> mqtt://{host}:{port} (Ctrl-C stops)", err=True)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(simulate(devices, host, port, interval_s=interval))
