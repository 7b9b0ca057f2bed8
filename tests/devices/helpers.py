"""Playing the device side without a broker: readings, online and results written through
the same domain functions the device link calls."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
from sqlalchemy import Row, select

from devicecontrol.clock import utcnow
from devicecontrol.database.tables import commands as commands_table
from devicecontrol.devices import repository
from devicecontrol.devices.commands import repository as commands_repository
from devicecontrol.devices.commands import service as commands
from devicecontrol.devices.readings import repository as readings_repository
from devicecontrol.devices.readings.repository import ArrivedReading
from devicecontrol.runtime import Runtime

ANA = "ana@example.com"
BOB = "bob@example.com"
MELISSA_SETTINGS = {"state": 1, "mode": 3, "temp": 22, "fan": 2}


async def device_row(runtime: Runtime, serial_number: str) -> Row:
    """The controller's id, type and secret digest, as the link finds them."""
    async with runtime.database.read() as connection:
        row = await repository.find_device(connection, serial_number)
    assert row is not None, serial_number
    return row


async def report(runtime: Runtime, serial_number: str, payload: dict[str, Any]) -> None:
    """The device publishes a reading on ``devices/<sn>/state``."""
    device = await device_row(runtime, serial_number)
    arrived = ArrivedReading(device.id, msgspec.json.encode(payload).decode(), utcnow())
    async with runtime.database.write() as connection:  # as the link's ingest stores it
        await readings_repository.insert_readings(connection, [arrived])


async def set_online(runtime: Runtime, serial_number: str, online: bool) -> None:
    device = await device_row(runtime, serial_number)
    async with runtime.database.write() as connection:
        await repository.set_online(connection, device.id, online=online, now=utcnow())


async def command_rows(runtime: Runtime, serial_number: str) -> list[Row]:
    """Every command of the controller, whoever made it, oldest first."""
    device = await device_row(runtime, serial_number)
    async with runtime.database.read() as connection:
        query = (
            select(*commands_repository.COMMAND_COLUMNS)
            .where(commands_table.c.controller_id == device.id)
            .order_by(commands_table.c.id)
        )
        return list(await connection.execute(query))


async def deliver(runtime: Runtime, serial_number: str, public_id: str) -> Row:
    """The link publishes the command to the device (``sent``)."""
    device = await device_row(runtime, serial_number)
    async with runtime.database.read() as connection:
        command = await commands_repository.find_command(connection, device.id, public_id)
    assert command is not None and await commands.mark_sent(runtime, serial_number, command)
    return command


async def answer(
    runtime: Runtime, serial_number: str, public_id: str, status: str = "succeeded", **fields: Any
) -> None:
    """The device reports the command's result (after its delivery)."""
    device = await device_row(runtime, serial_number)
    await deliver(runtime, serial_number, public_id)
    outcome = await commands.record_result(
        runtime, device.id, serial_number, {"id": public_id, "status": status, **fields}
    )
    assert outcome.dropped is None, outcome


async def next_unfinished(runtime: Runtime, serial_number: str, timeout_s: float = 5) -> Row:
    """The first command the device has not finished, as soon as one is made."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while asyncio.get_running_loop().time() < deadline:
        pending = [c for c in await command_rows(runtime, serial_number) if c.status == "queued"]
        if pending:
            return pending[0]
        await asyncio.sleep(0.01)
    raise AssertionError(f"no command for {serial_number} within {timeout_s} s")


async def make_commands(
    runtime: Runtime,
    user_id: int,
    serial_number: str,
    count: int,
    *,
    name: str = "switch_on_off",
    fields: dict[str, Any] | None = None,
    ttl_s: int = 300,
) -> list[Row]:
    """``count`` commands made directly through the service (faster than HTTP)."""
    device = await commands.owned_device(runtime, user_id, serial_number)
    return [
        await commands.create_command(
            runtime,
            device,
            name=name,
            fields={"state": "on"} if fields is None else fields,
            ttl_s=ttl_s,
            strict=True,
        )
        for _ in range(count)
    ]
