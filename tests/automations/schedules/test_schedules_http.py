"""Schedule endpoints (contract §12): the owner's only, checked when written, in an IANA
zone that defaults to the owner's profile's."""

from __future__ import annotations

import json
import re

import pytest

from devicecontrol.users.service import create_user
from tests.controllers.helpers import assert_problem
from tests.devices.helpers import ANA, BOB
from tests.factories import PASSWORD, bearer, logged_in_user, login, make_client, make_controller

SCHEDULES = "/v1/schedules"
BODY = {
    "controller_id": "PLUG1", "days": "1111100", "from_time": "07:00", "to_time": "22:30",
    "command_name": "switch_on_off", "command_fields": {"state": "on"},
    "end_command_name": "switch_on_off", "end_command_fields": '{"state": "off"}',
    "time_zone": "Europe/Berlin", "active": 1,
}  # fmt: skip
FIELDS = {
    "id", "controller_id", "user_id", "days", "from_time", "to_time", "command_name",
    "command_fields", "end_command_name", "end_command_fields", "time_zone", "active",
    "next_fire_at", "last_fired_at", "last_command_id", "_links",
}  # fmt: skip
TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d")


@pytest.fixture
async def ana(runtime, client) -> dict[str, str]:
    _, headers = await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, "PLUG1", owner=ANA, type="smart_plug")
    return headers


async def make(client, headers, **changes) -> dict:
    response = await client.post(SCHEDULES, json={**BODY, **changes}, headers=headers)
    assert response.status_code == 201, response.text
    return response.json()["schedule"]


async def test_create_is_201_with_location_and_the_schedule(client, ana):
    response = await client.post(SCHEDULES, json=BODY, headers=ana)
    assert response.status_code == 201, response.text
    schedule = response.json()["schedule"]
    path = f"/v1/schedules/PLUG1/{schedule['id']}"
    assert response.headers["location"] == path
    assert set(schedule) == FIELDS
    assert schedule["controller_id"] == "PLUG1"
    assert (schedule["days"], schedule["from_time"], schedule["to_time"]) == (
        "1111100", "07:00", "22:30")  # fmt: skip
    assert json.loads(schedule["command_fields"]) == {"state": "on"}
    assert json.loads(schedule["end_command_fields"]) == {"state": "off"}
    assert (schedule["time_zone"], schedule["active"]) == ("Europe/Berlin", 1)
    assert TIMESTAMP.fullmatch(schedule["next_fire_at"])
    assert schedule["last_fired_at"] is schedule["last_command_id"] is None
    assert schedule["_links"] == {"self": {"href": path}}
    read = await client.get(path, headers=ana)
    assert read.status_code == 200 and read.json()["schedule"] == schedule


async def test_the_lists_are_hal_pages_of_the_callers_schedules(client, ana, runtime):
    await make_controller(runtime, "PLUG2", owner=ANA, type="smart_plug")
    first = await make(client, ana)
    second = await make(client, ana, controller_id="PLUG2", days="0000011")
    for path in (SCHEDULES, "/schedules"):
        page = (await client.get(path, headers=ana)).json()
        assert page["_embedded"]["schedule"] == [first, second] and page["total"] == 2
        assert page["_links"]["self"] == {"href": "/v1/schedules?page=1"}
    one = (await client.get(f"{SCHEDULES}/PLUG2", headers=ana)).json()
    assert one["_embedded"]["schedule"] == [second]
    assert one["_links"]["self"] == {"href": "/v1/schedules/PLUG2?page=1"}
    _, bob = await logged_in_user(runtime, client, BOB)
    assert (await client.get(SCHEDULES, headers=bob)).json()["total"] == 0


async def test_another_accounts_controller_and_schedules_are_404(client, ana, runtime):
    schedule = await make(client, ana)
    _, bob = await logged_in_user(runtime, client, BOB)
    await make_controller(runtime, "BOBS", owner=BOB, type="smart_plug")
    assert_problem(await client.get(f"{SCHEDULES}/PLUG1", headers=bob), 404)
    path = f"{SCHEDULES}/PLUG1/{schedule['id']}"
    for method in ("GET", "PATCH", "DELETE"):
        assert_problem(await client.request(method, path, headers=bob, json={}), 404)
    assert_problem(await client.post(SCHEDULES, json=BODY, headers=bob), 404)
    # the id of her schedule under his own controller is no schedule of his either
    assert_problem(await client.get(f"{SCHEDULES}/BOBS/{schedule['id']}", headers=bob), 404)
    for unknown in ("999", "x", "0", "-1", "2147483648", "99999999999999999999"):
        assert_problem(await client.get(f"{SCHEDULES}/PLUG1/{unknown}", headers=ana), 404)
    assert_problem(await client.get(f"{SCHEDULES}/NOPE", headers=ana), 404)


BAD_FIELDS = [
    ({"days": "1111111x"}, "days"),
    ({"days": "2111111"}, "days"),
    ({"days": None}, "days"),
    ({"from_time": "7:00"}, "from_time"),
    ({"from_time": "24:00"}, "from_time"),
    ({"from_time": None}, "from_time"),
    ({"to_time": "12:60"}, "to_time"),
    ({"to_time": "07:00"}, "to_time"),  # the same as from_time
    ({"to_time": None}, "to_time"),  # an end command needs it
    ({"time_zone": "Mars/Olympus"}, "time_zone"),
    ({"time_zone": "../../etc/passwd"}, "time_zone"),
    ({"time_zone": 3}, "time_zone"),
    ({"command_name": "explode"}, "command_name"),
    ({"command_fields": {"state": "dim"}}, "command_fields.state"),
    ({"end_command_fields": "nope"}, "end_command_fields"),
    ({"active": "1"}, "active"),
]


async def test_a_bad_field_is_400_naming_it_and_writes_nothing(client, ana):
    for change, field in BAD_FIELDS:
        response = await client.post(SCHEDULES, json={**BODY, **change}, headers=ana)
        assert_problem(response, 400, field)
    assert_problem(await client.post(SCHEDULES, json={"days": "1"}, headers=ana), 400,
                   "controller_id")  # fmt: skip
    assert (await client.get(SCHEDULES, headers=ana)).json()["total"] == 0


async def test_the_time_zone_defaults_to_the_owners_profile_else_utc(client, runtime):
    await make_client(runtime)
    await create_user(runtime, ANA, password=PASSWORD, country="BG", city="Sofia")
    ana = bearer((await login(client, ANA))["access_token"])
    await make_controller(runtime, "PLUG1", owner=ANA, type="smart_plug")
    without_zone = {k: v for k, v in BODY.items() if k != "time_zone"}
    response = await client.post(SCHEDULES, json=without_zone, headers=ana)
    assert response.json()["schedule"]["time_zone"] == "Europe/Sofia"
    _, bob = await logged_in_user(runtime, client, BOB)  # no country record
    await make_controller(runtime, "BOBS", owner=BOB, type="smart_plug")
    mine = await make(client, bob, controller_id="BOBS", time_zone=None)  # null: the default
    assert mine["time_zone"] == "UTC"


async def test_patch_changes_what_it_names_and_works_out_the_next_firing_again(client, ana):
    schedule = await make(client, ana, days="1111111", time_zone="UTC")
    path = f"{SCHEDULES}/PLUG1/{schedule['id']}"
    response = await client.patch(path, json={"time_zone": "Pacific/Auckland"}, headers=ana)
    assert response.status_code == 200, response.text
    changed = response.json()["schedule"]
    assert changed["time_zone"] == "Pacific/Auckland"
    assert changed["next_fire_at"] != schedule["next_fire_at"]
    ended = (await client.patch(path, json={"to_time": None, "end_command_name": None},
                                headers=ana)).json()["schedule"]  # fmt: skip
    assert ended["to_time"] is ended["end_command_name"] is ended["end_command_fields"] is None
    paused = (await client.patch(path, json={"active": 0}, headers=ana)).json()["schedule"]
    assert (paused["active"], paused["next_fire_at"]) == (0, None)
    assert_problem(await client.patch(path, json={"days": "1"}, headers=ana), 400, "days")
    assert_problem(await client.patch(path, json={"controller_id": "X"}, headers=ana), 400,
                   "controller_id")  # fmt: skip
    assert (await client.get(path, headers=ana)).json()["schedule"] == paused


async def test_delete_answers_the_schedule_and_it_is_gone(client, ana):
    schedule = await make(client, ana)
    path = f"/schedules/PLUG1/{schedule['id']}"  # unprefixed too
    response = await client.delete(path, headers=ana)
    assert response.status_code == 200 and response.json()["schedule"] == schedule
    assert_problem(await client.get(path, headers=ana), 404)


async def test_a_controller_has_at_most_50_schedules_and_a_deleted_one_makes_room(
    client, ana, runtime
):
    await make_controller(runtime, "PLUG2", owner=ANA, type="smart_plug")
    made = [await make(client, ana) for _ in range(50)]
    response = await client.post(SCHEDULES, json=BODY, headers=ana)
    assert_problem(response, 409)
    assert "50 schedules" in response.json()["detail"]
    listed = await client.get(f"{SCHEDULES}/PLUG1", params={"page_size": 100}, headers=ana)
    assert listed.json()["total"] == 50  # nothing written
    await make(client, ana, controller_id="PLUG2")  # another controller has its own
    deleted = await client.delete(f"{SCHEDULES}/PLUG1/{made[0]['id']}", headers=ana)
    assert deleted.status_code == 200, deleted.text
    await make(client, ana)
