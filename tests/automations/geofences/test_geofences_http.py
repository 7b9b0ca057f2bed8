"""Geofences (contract §12): the original's shape, the owner's only, commands checked when
written, and a command only on a crossing (with hysteresis) or a direct enter/exit."""

from __future__ import annotations

import asyncio
import json

import pytest

from devicecontrol.automations.geofences import service as geofences
from devicecontrol.automations.geofences.service import distance_m, inside_after
from devicecontrol.controllers.service import reassign_controller
from devicecontrol.errors import NotFound
from devicecontrol.users.identity import username_key
from devicecontrol.users.repository import find_active_user_id
from tests.controllers.helpers import assert_problem, concurrent_client
from tests.devices.helpers import ANA, BOB, command_rows
from tests.factories import logged_in_user, make_controller, make_user

GEOFENCES = "/v1/geofences"
HOME = {"latitude": 42.6977, "longitude": 23.3219}  # Sofia
PLUG_FENCE = {
    "controller_id": "PLUG1", **HOME, "radius": 200,
    "enter_command_name": "switch_on_off", "enter_command_fields": {"state": "on"},
    "exit_command_name": "switch_on_off", "exit_command_fields": '{"state": "off"}',
}  # fmt: skip
ITEM_FIELDS = {
    "id", "controller_id", "user_id", "latitude", "longitude", "radius", "enter_command_name",
    "enter_command_fields", "exit_command_name", "exit_command_fields", "active",
    "enter_push", "exit_push", "_links",
}  # fmt: skip
# a degree of latitude is about 111 km: these are metres north of HOME
METRE = 1 / 111_195


def north(metres: float) -> dict[str, float]:
    return {"latitude": HOME["latitude"] + metres * METRE, "longitude": HOME["longitude"]}


@pytest.fixture
async def ana(runtime, client) -> dict[str, str]:
    _, headers = await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, "PLUG1", owner=ANA, type="smart_plug")
    return headers


async def make_fence(client, headers, **changes) -> dict:
    response = await client.post(GEOFENCES, json={**PLUG_FENCE, **changes}, headers=headers)
    assert response.status_code == 201, response.text
    return response.json()["geofence"]


async def test_create_is_201_with_location_and_the_original_shape(client, ana, runtime):
    response = await client.post(GEOFENCES, json=PLUG_FENCE, headers=ana)
    assert response.status_code == 201, response.text
    assert response.headers["content-type"].startswith("application/hal+json")
    fence = response.json()["geofence"]
    path = f"/v1/geofences/{fence['id']}"
    assert response.headers["location"] == path
    assert set(fence) == ITEM_FIELDS
    assert fence["controller_id"] == "PLUG1"  # the serial number, a string
    assert fence["enter_command_fields"] == '{"state":"on"}'  # a JSON-encoded string
    assert json.loads(fence["exit_command_fields"]) == {"state": "off"}  # sent as a string
    assert (fence["active"], fence["enter_push"], fence["exit_push"]) == (1, 0, 0)
    assert fence["radius"] == 200 and fence["latitude"] == HOME["latitude"]
    assert fence["_links"] == {"self": {"href": path}}
    read = await client.get(path, headers=ana)
    assert read.status_code == 200 and read.json()["geofence"] == fence
    assert await command_rows(runtime, "PLUG1") == []  # writing fires nothing


async def test_list_is_a_hal_page_of_the_callers_geofences_at_both_paths(client, ana, runtime):
    first = await make_fence(client, ana)
    second = await make_fence(client, ana, radius=5000, active=0)
    _, bob = await logged_in_user(runtime, client, BOB)
    for path in (GEOFENCES, "/geofences"):
        page = (await client.get(path, headers=ana)).json()
        assert page["_embedded"]["geofence"] == [first, second]
        assert page["total"] == 2
        assert page["_links"]["self"] == {"href": "/v1/geofences?page=1"}
        assert page["_links"]["first"] == page["_links"]["last"] == page["_links"]["self"]
    theirs = (await client.get(GEOFENCES, headers=bob)).json()
    assert theirs["_embedded"]["geofence"] == [] and theirs["total"] == 0
    paged = (await client.get(GEOFENCES + "?page_size=1&page=2", headers=ana)).json()
    assert paged["_embedded"]["geofence"] == [second] and paged["page_count"] == 2


async def test_another_accounts_geofence_and_controller_are_404(client, ana, runtime):
    fence = await make_fence(client, ana)
    _, bob = await logged_in_user(runtime, client, BOB)
    path = f"{GEOFENCES}/{fence['id']}"
    for method, suffix in (("GET", ""), ("PATCH", ""), ("DELETE", ""), ("POST", "/location"),
                           ("POST", "/enter"), ("POST", "/exit")):  # fmt: skip
        response = await client.request(method, path + suffix, headers=bob, json={})
        assert_problem(response, 404)
    for unknown in ("999999", "abc", "0", "1.0", "01", "2147483648", "892360146525868338"):
        assert_problem(await client.get(f"{GEOFENCES}/{unknown}", headers=ana), 404)
    assert_problem(await client.post(GEOFENCES, json=PLUG_FENCE, headers=bob), 404)
    assert await command_rows(runtime, "PLUG1") == []


BAD_FIELDS = [
    ({"radius": 49}, "radius"),
    ({"radius": 100001}, "radius"),
    ({"radius": 60.5}, "radius"),
    ({"radius": "100"}, "radius"),
    ({"latitude": 90.5}, "latitude"),
    ({"longitude": -180.1}, "longitude"),
    ({"latitude": True}, "latitude"),
    ({"latitude": None}, "latitude"),
    ({"active": 2}, "active"),
    ({"enter_push": "yes"}, "enter_push"),
    ({"enter_command_name": "explode"}, "enter_command_name"),
    ({"exit_command_name": None}, "exit_command_name"),
    ({"enter_command_fields": {"state": "dim"}}, "enter_command_fields.state"),
    ({"exit_command_fields": {}}, "exit_command_fields.state"),
    ({"exit_command_fields": "{not json"}, "exit_command_fields"),
    ({"exit_command_fields": "[1]"}, "exit_command_fields"),
    ({"enter_command_fields": {"state": "on", "level": 3}}, "enter_command_fields.level"),
    ({"controller_id": 7}, "controller_id"),
]


async def test_a_bad_field_is_400_naming_it_and_writes_nothing(client, ana):
    """One test for all (each its own request): a database per case cost 0.5 s."""
    for change, field in BAD_FIELDS:
        response = await client.post(GEOFENCES, json={**PLUG_FENCE, **change}, headers=ana)
        assert_problem(response, 400, field)
    assert (await client.get(GEOFENCES, headers=ana)).json()["total"] == 0


async def test_bodies_that_are_not_json_objects_are_refused(client, ana):
    assert_problem(await client.post(GEOFENCES, content=b"[1]", headers={
        **ana, "content-type": "application/json"}), 400)  # fmt: skip
    assert_problem(await client.post(GEOFENCES, content=b"x", headers={
        **ana, "content-type": "text/plain"}), 415)  # fmt: skip


async def test_patch_changes_what_it_names_and_checks_the_result_whole(client, ana):
    fence = await make_fence(client, ana)
    path = f"{GEOFENCES}/{fence['id']}"
    response = await client.patch(path, json={"radius": 800, "exit_push": 1}, headers=ana)
    assert response.status_code == 200, response.text
    changed = response.json()["geofence"]
    assert (changed["radius"], changed["exit_push"]) == (800, 1)
    assert changed["enter_command_fields"] == fence["enter_command_fields"]
    # a new command checked with the stored fields: switch_on_off's state is no led_on_off's
    assert_problem(await client.patch(path, json={"radius": 10}, headers=ana), 400, "radius")
    refused = await client.patch(path, json={"controller_id": "OTHER"}, headers=ana)
    assert_problem(refused, 400, "controller_id")
    assert (await client.get(path, headers=ana)).json()["geofence"] == changed


async def test_delete_answers_the_geofence_and_it_is_gone(client, ana):
    fence = await make_fence(client, ana)
    path = f"{GEOFENCES}/{fence['id']}"
    response = await client.delete(path, headers=ana)
    assert response.status_code == 200 and response.json()["geofence"] == fence
    assert_problem(await client.get(path, headers=ana), 404)
    assert_problem(await client.delete(path, headers=ana), 404)


def test_inside_after_keeps_a_hysteresis_of_a_tenth_of_the_radius():
    assert inside_after(None, 200, 200) is True  # the first report: the radius itself
    assert inside_after(None, 201, 200) is False
    assert inside_after(True, 219, 200) is True  # inside stays inside up to +10 %
    assert inside_after(True, 221, 200) is False
    assert inside_after(False, 181, 200) is False  # outside stays outside down to -10 %
    assert inside_after(False, 179, 200) is True
    assert distance_m(0, 0, 1, 0) == pytest.approx(111_195, rel=1e-3)


async def location(client, headers, fence_id: int, metres: float) -> dict:
    response = await client.post(
        f"{GEOFENCES}/{fence_id}/location", json=north(metres), headers=headers
    )
    assert response.status_code == 200, response.text
    return response.json()


async def test_location_fires_only_on_a_crossing_past_the_hysteresis(client, ana, runtime):
    fence = await make_fence(client, ana)  # radius 200: leaves past 220, enters within 180
    first = await location(client, ana, fence["id"], 1000)
    assert (first["inside"], first["command"]) == (False, None)  # a first report fires nothing
    assert (await location(client, ana, fence["id"], 190))["command"] is None  # in the band
    entered = await location(client, ana, fence["id"], 150)
    assert entered["inside"] is True
    assert (entered["command"]["name"], entered["command"]["params"]) == (
        "switch_on_off", {"state": "on"})  # fmt: skip
    assert entered["command"]["status"] == "queued"
    assert (await location(client, ana, fence["id"], 50))["command"] is None  # still inside
    assert (await location(client, ana, fence["id"], 215))["inside"] is True  # in the band
    left = await location(client, ana, fence["id"], 230)
    assert (left["inside"], left["command"]["params"]) == (False, {"state": "off"})
    made = await command_rows(runtime, "PLUG1")
    assert [c.public_id for c in made] == [entered["command"]["id"], left["command"]["id"]]
    # an ordinary command of the controller, readable with the native endpoint
    read = await client.get(f"/v1/controllers/PLUG1/commands/{left['command']['id']}", headers=ana)
    assert read.status_code == 200


async def test_location_needs_coordinates_in_range(client, ana):
    fence = await make_fence(client, ana)
    path = f"{GEOFENCES}/{fence['id']}/location"
    assert_problem(await client.post(path, json={"latitude": 91, "longitude": 0}, headers=ana),
                   400, "latitude")  # fmt: skip
    assert_problem(await client.post(path, json={"latitude": 1}, headers=ana), 400, "longitude")
    both = await client.post(path, json={"latitude": True, "longitude": "2"}, headers=ana)
    assert assert_problem(both, 400)["errors"] == [
        {"field": "latitude", "message": "must be a number from -90 to 90"},
        {"field": "longitude", "message": "must be a number from -180 to 180"},
    ]


async def test_enter_and_exit_fire_directly_with_201(client, ana, runtime):
    fence = await make_fence(client, ana)
    entered = await client.post(f"{GEOFENCES}/{fence['id']}/enter", headers=ana)
    assert entered.status_code == 201, entered.text
    body = entered.json()
    assert body["inside"] is True and body["command"]["params"] == {"state": "on"}
    assert entered.headers["location"] == f"/v1/controllers/PLUG1/commands/{body['command']['id']}"
    again = await client.post(f"/geofences/{fence['id']}/enter", headers=ana)  # unprefixed
    assert again.status_code == 201 and again.json()["command"] is not None
    left = await client.post(f"{GEOFENCES}/{fence['id']}/exit", headers=ana)
    assert left.status_code == 201 and left.json()["command"]["params"] == {"state": "off"}
    assert len(await command_rows(runtime, "PLUG1")) == 3
    # the phone geofencing itself set the state: a location report inside is no crossing
    assert (await location(client, ana, fence["id"], 500))["command"] is None


async def test_an_inactive_geofence_fires_nothing(client, ana, runtime):
    fence = await make_fence(client, ana, active=0)
    await location(client, ana, fence["id"], 1000)
    crossed = await location(client, ana, fence["id"], 0)
    assert (crossed["inside"], crossed["command"]) == (True, None)
    for side in ("enter", "exit"):
        response = await client.post(f"{GEOFENCES}/{fence['id']}/{side}", headers=ana)
        assert response.status_code == 201 and response.json()["command"] is None
        assert "location" not in response.headers
    assert await command_rows(runtime, "PLUG1") == []


async def test_a_melissa_geofence_checks_the_full_catalogue(client, runtime):
    _, ana = await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, "MEL1", owner=ANA, type="melissa")
    body = {**PLUG_FENCE, "controller_id": "MEL1", "enter_command_name": "send_ir_code",
            "enter_command_fields": {"state": 1, "mode": 3, "temp": 22.0, "fan": 2},
            "exit_command_name": "turn_led_off", "exit_command_fields": None}  # fmt: skip
    fence = (await client.post(GEOFENCES, json=body, headers=ana)).json()["geofence"]
    assert json.loads(fence["enter_command_fields"]) == {
        "state": 1,
        "mode": 3,
        "temp": 22,
        "fan": 2,
    }
    assert fence["exit_command_fields"] == "{}"
    missing = {**body, "enter_command_fields": {"state": 1}}
    refused = assert_problem(await client.post(GEOFENCES, json=missing, headers=ana), 400)
    fields = {e["field"] for e in refused["errors"]}
    assert fields == {f"enter_command_fields.{name}" for name in ("mode", "temp", "fan")}


async def test_racing_reports_of_one_crossing_fire_one_command(client, ana, runtime, settings):
    fence = await make_fence(client, ana)
    await location(client, ana, fence["id"], 1000)
    path = f"{GEOFENCES}/{fence['id']}/location"
    async with concurrent_client(settings) as http:
        answers = await asyncio.gather(
            *(http.post(path, json=north(10), headers=ana) for _ in range(6))
        )
    assert all(answer.status_code == 200 for answer in answers), [a.text for a in answers]
    fired = [a.json()["command"] for a in answers if a.json()["command"] is not None]
    assert len(fired) == 1
    assert [c.public_id for c in await command_rows(runtime, "PLUG1")] == [fired[0]["id"]]


async def test_a_crossing_racing_a_hand_over_leaves_no_command_of_the_old_owner(runtime, ana):
    """Whichever wins, the hand-over fails what the crossing made, or the crossing finds
    its geofence gone (404): nothing of the previous ownership stays queued."""
    async with runtime.database.read() as connection:
        ana_id = await find_active_user_id(connection, username_key(ANA))
    bob_id = await make_user(runtime, BOB)
    rounds = [(ana_id, BOB), (bob_id, ANA)] * 3
    for owner_id, successor in rounds:
        row = await geofences.create_geofence(runtime, owner_id, PLUG_FENCE)
        outcomes = await asyncio.gather(
            geofences.cross(runtime, row, entering=True),
            reassign_controller(runtime, owner_id, "PLUG1", new_owner=successor),
            return_exceptions=True,
        )
        assert not [o for o in outcomes if isinstance(o, Exception) and not isinstance(o, NotFound)]
    statuses = [c.status for c in await command_rows(runtime, "PLUG1")]
    assert "queued" not in statuses, statuses


async def test_a_controller_has_at_most_20_geofences_and_a_deleted_one_makes_room(
    client, ana, runtime
):
    await make_controller(runtime, "PLUG2", owner=ANA, type="smart_plug")
    fences = [await make_fence(client, ana) for _ in range(20)]
    response = await client.post(GEOFENCES, json=PLUG_FENCE, headers=ana)
    assert_problem(response, 409)
    assert "20 geofences" in response.json()["detail"]
    listed = await client.get(GEOFENCES, params={"page_size": 100}, headers=ana)
    assert listed.json()["total"] == 20  # nothing written
    await make_fence(client, ana, controller_id="PLUG2")  # another controller has its own
    await client.delete(f"{GEOFENCES}/{fences[0]['id']}", headers=ana)
    await make_fence(client, ana)
