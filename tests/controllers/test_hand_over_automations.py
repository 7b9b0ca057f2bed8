"""A hand-over or a release deletes the previous owner's geofences and schedules of that
controller (contract §12), in the transaction of the hand-over; others' stay."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from devicecontrol.database.tables import controllers, geofences, schedules
from tests.devices.helpers import ANA, BOB
from tests.factories import logged_in_user, make_controller

FENCE = {
    "latitude": 42.7, "longitude": 23.3, "radius": 100,
    "enter_command_name": "switch_on_off", "enter_command_fields": {"state": "on"},
    "exit_command_name": "switch_on_off", "exit_command_fields": {"state": "off"},
}  # fmt: skip
SCHEDULE = {
    "days": "1111111", "from_time": "07:00", "command_name": "switch_on_off",
    "command_fields": {"state": "on"}, "time_zone": "UTC",
}  # fmt: skip


async def automate(client, headers, serial_number: str) -> None:
    body = {"controller_id": serial_number}
    assert (await client.post("/v1/geofences", json={**body, **FENCE}, headers=headers)).is_success
    assert (
        await client.post("/v1/schedules", json={**body, **SCHEDULE}, headers=headers)
    ).is_success


async def rows_of(runtime, serial_number: str) -> tuple[int, int]:
    """How many geofences and schedules the controller has, whoever's."""
    counts = []
    async with runtime.database.read() as connection:
        for table in (geofences, schedules):
            query = (
                select(func.count())
                .select_from(table.join(controllers))
                .where(controllers.c.serial_number == serial_number)
            )
            counts.append((await connection.execute(query)).scalar_one())
    return counts[0], counts[1]


@pytest.mark.parametrize("hand_over", ["reassign", "release"])
async def test_a_hand_over_deletes_the_previous_owners_automations(runtime, client, hand_over):
    _, ana = await logged_in_user(runtime, client, ANA)
    _, bob = await logged_in_user(runtime, client, BOB)
    await make_controller(runtime, "PLUG1", owner=ANA, type="smart_plug")
    await make_controller(runtime, "PLUG2", owner=ANA, type="smart_plug")
    await automate(client, ana, "PLUG1")
    await automate(client, ana, "PLUG2")
    if hand_over == "reassign":
        response = await client.patch(
            "/v1/controllers/PLUG1/reassign", json={"owner": BOB}, headers=ana
        )
    else:
        response = await client.delete("/v1/controllers/PLUG1/assign", headers=ana)
        assert (await client.post("/v1/controllers/PLUG1/assign", headers=bob)).is_success
    assert response.status_code == 200, response.text
    assert await rows_of(runtime, "PLUG1") == (0, 0)
    assert await rows_of(runtime, "PLUG2") == (1, 1)  # her other controller keeps its own
    for path in ("/v1/geofences", "/v1/schedules"):
        assert (await client.get(path, headers=ana)).json()["total"] == 1
        assert (await client.get(path, headers=bob)).json()["total"] == 0
    assert (await client.get("/v1/schedules/PLUG1", headers=bob)).json()["total"] == 0


async def test_a_refused_hand_over_deletes_nothing(runtime, client):
    _, ana = await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, "PLUG1", owner=ANA, type="smart_plug")
    await automate(client, ana, "PLUG1")
    response = await client.patch(
        "/v1/controllers/PLUG1/reassign", json={"owner": "nobody@example.com"}, headers=ana
    )
    assert response.status_code == 422
    assert await rows_of(runtime, "PLUG1") == (1, 1)
