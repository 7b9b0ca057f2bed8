"""A device may invent at most ``MAX_FIELDS`` field names (``field_budget.py``): the names
past the budget are left out of the stored reading and counted, its type's own are always
kept, another device is untouched, and the budget outlives the link."""

from __future__ import annotations

import msgspec
from sqlalchemy import func, select

from devicecontrol.database.tables import reading_fields
from devicecontrol.devices.readings.fields import MAX_FIELDS
from tests.devices.link.support import (
    device,
    eventually,
    metric,
    provision,
    running_link,
    stored_readings,
)

SERIAL, OTHER = "PLUG-1", "PLUG-2"
DROPPED = "devicecontrol_device_fields_dropped_total"
INVENTED = [f"f{number:03}" for number in range(MAX_FIELDS + 16)]


def state(serial: str) -> str:
    return f"devices/{serial}/state"


async def readings_of(runtime, serial: str, count: int) -> list[dict]:
    async def enough():
        stored = await stored_readings(runtime, serial)
        return stored if len(stored) >= count else None

    return await eventually(enough, what=f"{count} readings of {serial}")


async def test_names_past_the_budget_are_left_out_and_counted_and_the_types_own_kept(runtime):
    await provision(runtime, SERIAL)
    await provision(runtime, OTHER)
    before = metric(DROPPED)
    flood = {"relay_state": "on", **dict.fromkeys(INVENTED, 1), "power": [1.5]}
    async with running_link(runtime) as link:
        async with device(link, SERIAL) as plug:
            await plug.publish(state(SERIAL), msgspec.json.encode(flood), qos=1)
            await plug.publish(state(SERIAL), b'{"new": 1, "relay_state": "off", "power": [0]}')
        async with device(link, OTHER) as other:
            await other.publish(state(OTHER), b'{"its_own": 1, "relay_state": "on"}', qos=1)
        first, second = await readings_of(runtime, SERIAL, 2)
        assert await readings_of(runtime, OTHER, 1) == [{"its_own": 1, "relay_state": "on"}]
    assert first == {"relay_state": "on", **dict.fromkeys(INVENTED[:MAX_FIELDS], 1), "power": [1.5]}
    assert second == {"relay_state": "off", "power": [0]}
    assert metric(DROPPED) == before + 16 + 1
    async with runtime.database.read() as connection:
        count = select(func.count()).select_from(reading_fields)
        assert (await connection.execute(count)).scalar_one() == MAX_FIELDS + 2 + 2

    async with running_link(runtime) as link, device(link, SERIAL) as plug:  # a new link
        await plug.publish(state(SERIAL), b'{"later": 1, "f001": 5, "relay_state": "on"}', qos=1)
        *_, third = await readings_of(runtime, SERIAL, 3)
    assert third == {"f001": 5, "relay_state": "on"}
