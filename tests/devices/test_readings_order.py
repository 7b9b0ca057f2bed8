"""Several link processes store one device's messages side by side (contract §9, several
link processes), so one that arrived earlier may commit later: the controller's latest
reading and ``last_seen`` only move forward in arrival time, on both engines."""

from __future__ import annotations

from datetime import datetime

import msgspec
from sqlalchemy import select

from devicecontrol.database.tables import controllers, latest_readings, readings
from devicecontrol.devices import repository
from devicecontrol.devices.readings import repository as readings_repository
from devicecontrol.devices.readings.repository import ArrivedReading
from devicecontrol.runtime import Runtime
from tests.devices.helpers import device_row
from tests.factories import make_controller

SERIAL = "PLUG-ORDER"
EARLIER = datetime(2026, 3, 1, 12, 0, 0, 300_000)
LATER = datetime(2026, 3, 1, 12, 0, 0, 700_000)  # the same second: only microseconds tell
LATEST = datetime(2026, 3, 1, 12, 0, 5)


async def store(runtime: Runtime, reading: str, arrived_at: datetime) -> None:
    """One link's batch of one reading, in a transaction of its own."""
    device = await device_row(runtime, SERIAL)
    async with runtime.database.write() as connection:
        payload = msgspec.json.encode({"seq": reading}).decode()
        await readings_repository.insert_readings(
            connection, [ArrivedReading(device.id, payload, arrived_at)]
        )


async def latest_and_last_seen(runtime: Runtime) -> tuple[str, datetime, datetime]:
    """The latest reading's ``seq`` and arrival, and the controller's ``last_seen``."""
    async with runtime.database.read() as connection:
        query = select(
            latest_readings.c.payload, latest_readings.c.created_at, controllers.c.last_seen
        ).join(controllers, controllers.c.id == latest_readings.c.controller_id)
        row = (await connection.execute(query.where(controllers.c.serial_number == SERIAL))).one()
    return msgspec.json.decode(row.payload)["seq"], row.created_at, row.last_seen


async def history(runtime: Runtime) -> list[str]:
    async with runtime.database.read() as connection:
        rows = await connection.execute(select(readings.c.payload).order_by(readings.c.id))
        return [msgspec.json.decode(row.payload)["seq"] for row in rows]


async def test_an_older_reading_stored_after_a_newer_one_leaves_the_newer_latest_and_last_seen(
    runtime,
):
    await make_controller(runtime, SERIAL)
    await store(runtime, "later", LATER)
    await store(runtime, "earlier", EARLIER)  # another link's, committed after
    assert await latest_and_last_seen(runtime) == ("later", LATER, LATER)
    assert await history(runtime) == ["later", "earlier"]  # stored all the same
    await store(runtime, "latest", LATEST)
    assert await latest_and_last_seen(runtime) == ("latest", LATEST, LATEST)


async def test_of_two_readings_with_one_arrival_time_the_one_stored_last_is_latest(runtime):
    """One link stamps a second reading with the same time (a coarse clock): its own order
    of storing is the order of arrival."""
    await make_controller(runtime, SERIAL)
    await store(runtime, "first", LATER)
    await store(runtime, "second", LATER)
    assert await latest_and_last_seen(runtime) == ("second", LATER, LATER)


async def test_a_connect_or_a_result_noted_before_a_stored_reading_keeps_last_seen(runtime):
    """Shard 0 writes a connect (online, with its time) and stores results; another link
    may have stored a later reading of the device meanwhile."""
    await make_controller(runtime, SERIAL)
    await store(runtime, "later", LATER)
    device = await device_row(runtime, SERIAL)
    async with runtime.database.write() as connection:
        changed = await repository.set_presence(connection, {device.id: (True, EARLIER)})
        await repository.touch_last_seen(connection, device.id, EARLIER)
    assert changed == [(device.id, SERIAL, True)]  # online all the same
    assert await latest_and_last_seen(runtime) == ("later", LATER, LATER)
    async with runtime.database.write() as connection:
        await repository.set_presence(connection, {device.id: (True, LATEST)})
    assert (await latest_and_last_seen(runtime))[2] == LATEST
