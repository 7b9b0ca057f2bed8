"""``controllers add | import | rotate-secret`` with an external broker: the devices'
accounts go to the broker within the command's transaction (contract §9).

With ``DEVICECONTROL_MQTT_URL`` set, Mosquitto checks devices' secrets, and the plaintext
of a secret exists only while the command that sets it runs. So each of these commands
connects to the broker first (an unreachable one fails the command before anything is
read), writes as usual, and sends the accounts (``devices/link/mosquitto/dynsec.py``) as
the last step of its transaction: when the broker refuses, the transaction rolls back and
the command fails with one line. Without an external broker, or with a broker that asks the
service (``DEVICECONTROL_BROKER_HOOK_LISTEN``), they are the plain service calls.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, cast

from devicecontrol.controllers import provisioning, registry_repository
from devicecontrol.controllers.csvfile import open_rows
from devicecontrol.controllers.spec import ControllerSpec, parse_spec
from devicecontrol.database.engine import Database, Writer
from devicecontrol.devices import identity
from devicecontrol.devices.link.mosquitto import dynsec
from devicecontrol.errors import InvalidField
from devicecontrol.runtime import Runtime

BeforeCommit = Callable[[Writer], Awaitable[None]]


class _PushedBeforeCommit:
    """The runtime's database, whose write transactions end with ``before_commit``: what
    it raises rolls the transaction back. Everything else is the database's own."""

    def __init__(self, database: Database, before_commit: BeforeCommit) -> None:
        self._database = database
        self._before_commit = before_commit

    def __getattr__(self, name: str) -> Any:
        return getattr(self._database, name)

    @asynccontextmanager
    async def write(self) -> AsyncIterator[Writer]:
        async with self._database.write() as connection:
            yield connection
            await self._before_commit(connection)


def _pushing(runtime: Runtime, before_commit: BeforeCommit) -> Runtime:
    database = _PushedBeforeCommit(runtime.database, before_commit)
    return Runtime(runtime.settings, cast(Database, database))


async def add_controller(runtime: Runtime, spec: ControllerSpec) -> None:
    """``provisioning.add_controller``, and the new device's account on the broker."""
    secret = spec.device_secret
    if not runtime.settings.pushes_device_accounts or secret is None:
        await provisioning.add_controller(runtime, spec)
        return
    async with dynsec.DynamicSecurity(runtime.settings) as broker:

        async def push(_: Writer) -> None:
            await broker.run(dynsec.replace_account(spec.serial_number, secret))

        await provisioning.add_controller(_pushing(runtime, push), spec)


async def import_controllers(
    runtime: Runtime,
    path: Path,
    *,
    skip_invalid: bool,
    on_lines_read: Callable[[int], None] | None = None,
) -> provisioning.ImportReport:
    """``provisioning.import_controllers``, and an account on the broker for every row
    with a ``device_secret`` that the import leaves registered with that secret: a new
    device's replaces any the broker has; one registered before gets one only if the
    broker has none (so that importing an existing fleet's files moves it to the broker,
    and a rerun disconnects nobody)."""
    stated = _stated_secrets(path) if runtime.settings.pushes_device_accounts else {}
    if not stated:
        return await provisioning.import_controllers(
            runtime, path, skip_invalid=skip_invalid, on_lines_read=on_lines_read
        )
    serials = list(stated)
    async with runtime.database.read() as connection:
        before = set(await registry_repository.controllers_by_serial(connection, serials))
    async with dynsec.DynamicSecurity(runtime.settings) as broker:

        async def push(connection: Writer) -> None:
            registered = await registry_repository.controllers_by_serial(connection, serials)
            accounts = []
            for serial, secret in stated.items():
                row = registered.get(serial)
                if row is None or row.device_secret_digest != identity.device_secret_digest(secret):
                    continue  # a bad row, or a serial registered with another secret
                if serial in before:
                    accounts.append(dynsec.ensure_account(serial, secret))
                else:
                    accounts.append(dynsec.replace_account(serial, secret))
            await broker.run_in_batches(accounts)

        return await provisioning.import_controllers(
            _pushing(runtime, push), path, skip_invalid=skip_invalid, on_lines_read=on_lines_read
        )


def _stated_secrets(path: Path) -> dict[str, str]:
    """serial -> device_secret of the file's rows that parse and state one (the first row
    of a serial: the import refuses its repeats)."""
    stated: dict[str, str] = {}
    with open_rows(path) as rows:
        for _, row in rows:
            if None in row:
                continue
            try:
                spec = parse_spec(row)  # type: ignore[arg-type]  # no None key, checked above
            except InvalidField:
                continue
            if spec.device_secret is not None:
                stated.setdefault(spec.serial_number, spec.device_secret)
    return stated


async def rotate_device_secret(runtime: Runtime, serial_number: str) -> str:
    """``identity.rotate_device_secret``; the broker takes the new secret before it is
    stored, and ends a connection made with the old one."""
    if not runtime.settings.pushes_device_accounts:
        return await identity.rotate_device_secret(runtime, serial_number)
    async with dynsec.DynamicSecurity(runtime.settings) as broker:

        async def push(secret: str) -> None:
            await broker.run(dynsec.rotate_account(serial_number, secret))

        return await identity.rotate_device_secret(runtime, serial_number, before_commit=push)
