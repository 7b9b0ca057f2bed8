"""GET /controllers/{serial_number}: the caller's own controller, else one and the same 404."""

from __future__ import annotations

import pytest

from tests.conftest import SQLITE_ENOUGH
from tests.controllers.helpers import CONTROLLER_FIELDS, assert_problem, stamp
from tests.devices.helpers import MELISSA_SETTINGS, answer, make_commands, report
from tests.factories import logged_in_user, make_controller

pytestmark = SQLITE_ENOUGH

ANA = "ana@example.com"
BOB = "bob@example.com"


async def test_read_own_controller_returns_the_contract_body(runtime, client):
    user_id, ana = await logged_in_user(runtime, client, ANA)
    await make_controller(
        runtime, "MEL_1", owner=ANA, mac="0A1B2C3D4E5F", type="melissa", name="Kitchen",
        firmware_version="2.0.1", brand_id=3, room_id=None, online=False,
    )  # fmt: skip
    response = await client.get("/v1/controllers/MEL_1", headers=ana)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/hal+json")
    body = response.json()
    assert set(body) == {"controller", "_links"}
    assert body["_links"] == {"self": {"href": "/v1/controllers/MEL_1"}}
    assert set(body["controller"]) == CONTROLLER_FIELDS | {"_relation"}
    assert body["controller"] == {
        "user_id": user_id, "serial_number": "MEL_1", "mac": "0A1B2C3D4E5F",
        "firmware_version": "2.0.1", "name": "Kitchen", "type": "melissa", "room_id": None,
        "online": False, "brand_id": 3, "controller_log": [],
        "_links": {"self": {"href": "/v1/controllers/MEL_1"}},
        "_relation": {"command_log": {"state": 0, "mode": 0, "temp": 20, "fan": 0}},
    }  # fmt: skip


async def test_read_without_v1_prefix_gives_the_same_body(runtime, client):
    _, ana = await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, "ABC123", owner=ANA)
    prefixed = await client.get("/v1/controllers/ABC123", headers=ana)
    plain = await client.get("/controllers/ABC123", headers=ana)
    assert plain.status_code == 200
    assert plain.json() == prefixed.json()


async def test_read_someone_elses_and_unknown_controller_give_the_same_404(runtime, client):
    _, ana = await logged_in_user(runtime, client, ANA)
    await logged_in_user(runtime, client, BOB)
    await make_controller(runtime, "BOB001", owner=BOB)
    others = await client.get("/v1/controllers/BOB001", headers=ana)
    unknown = await client.get("/v1/controllers/NOPE01", headers=ana)
    assert_problem(others, 404)
    assert_problem(unknown, 404)
    # the only difference is the serial number the caller sent
    assert others.text == unknown.text.replace("NOPE01", "BOB001")
    assert others.headers["content-type"] == unknown.headers["content-type"]
    assert set(others.headers) == set(unknown.headers)


async def test_read_unowned_controller_is_404(runtime, client):
    _, ana = await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, "FREE01")
    assert_problem(await client.get("/v1/controllers/FREE01", headers=ana), 404)


async def test_read_matches_the_serial_number_exactly_and_case_sensitively(runtime, client):
    ana_id, ana = await logged_in_user(runtime, client, ANA)
    bob_id, bob = await logged_in_user(runtime, client, BOB)
    await make_controller(runtime, "abc", owner=ANA)
    await make_controller(runtime, "ABC", owner=BOB)
    own = await client.get("/v1/controllers/abc", headers=ana)
    assert own.json()["controller"]["user_id"] == ana_id
    assert_problem(await client.get("/v1/controllers/ABC", headers=ana), 404)
    assert (await client.get("/v1/controllers/ABC", headers=bob)).json()["controller"][
        "user_id"
    ] == bob_id
    assert_problem(await client.get("/v1/controllers/aBc", headers=ana), 404)
    for near in ["ab", "abcd", "ab_", "a%25", "%20abc"]:
        assert_problem(await client.get(f"/v1/controllers/{near}", headers=ana), 404)


@pytest.mark.parametrize(
    "serial",
    ["AB%20C", "ABC.json", "%C3%A9t%C3%A9", "A" * 65, "AB%00C", "AB%27%3B--", "%2A", "AB%25"],
)
async def test_read_serial_with_invalid_characters_is_404_not_5xx(runtime, client, serial):
    _, ana = await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, "ABC", owner=ANA)
    await make_controller(runtime, "A" * 64, owner=ANA)
    assert_problem(await client.get(f"/v1/controllers/{serial}", headers=ana), 404)


async def test_read_longest_valid_serial_number_is_found(runtime, client):
    _, ana = await logged_in_user(runtime, client, ANA)
    serial = "Z-_9" * 16
    await make_controller(runtime, serial, owner=ANA)
    response = await client.get(f"/v1/controllers/{serial}", headers=ana)
    assert response.status_code == 200
    assert response.json()["_links"]["self"]["href"] == f"/v1/controllers/{serial}"


# --- controller_log and command_log (contract §10) ----------------------------------------

NO_SETTINGS_YET = {"state": 0, "mode": 0, "temp": 20, "fan": 0}


async def read(client, serial: str, headers: dict[str, str]) -> dict:
    response = await client.get(f"/v1/controllers/{serial}", headers=headers)
    assert response.status_code == 200, response.text
    return response.json()["controller"]


async def test_controller_log_is_the_latest_reading_with_its_arrival_time(runtime, client, clock):
    _, ana = await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, "PLUG1", owner=ANA, type="smart_plug")
    assert (await read(client, "PLUG1", ana))["controller_log"] == []
    await report(runtime, "PLUG1", {"relay_state": "off", "power": [0.0]})
    clock.advance(7)
    await report(runtime, "PLUG1", {"relay_state": "on", "power": [12.5], "created": "x"})
    controller = await read(client, "PLUG1", ana)
    assert controller["controller_log"] == {
        "relay_state": "on", "power": [12.5], "created": stamp(clock),
    }  # fmt: skip
    assert controller["_relation"] == {"command_log": None}  # only a melissa has one


async def test_command_log_is_the_last_send_ir_code_whatever_became_of_it(runtime, client):
    user_id, ana = await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, "MEL1", owner=ANA, type="melissa")
    await report(runtime, "MEL1", {"temp": 21.5, "humidity": 40.2})
    # a melissa that reports but was never told anything: off, auto, 20 °C, auto fan
    controller = await read(client, "MEL1", ana)
    assert controller["_relation"] == {"command_log": NO_SETTINGS_YET}
    assert controller["controller_log"]["temp"] == 21.5
    first, second = MELISSA_SETTINGS, {"state": 1, "mode": 2, "temp": 26, "fan": 0}
    (sent,) = await make_commands(runtime, user_id, "MEL1", 1, name="send_ir_code", fields=first)
    await answer(runtime, "MEL1", sent.public_id)
    assert (await read(client, "MEL1", ana))["_relation"]["command_log"] == first
    (failed,) = await make_commands(runtime, user_id, "MEL1", 1, name="send_ir_code",
                                    fields=second)  # fmt: skip
    await answer(runtime, "MEL1", failed.public_id, "failed", error="no IR code set")
    await make_commands(runtime, user_id, "MEL1", 1, name="turn_led_off", fields={})
    assert (await read(client, "MEL1", ana))["_relation"]["command_log"] == second
    sent_through_provider = {"serial_number": "MEL1", "command": "send_ir_code",
                             **first, "temp": 17.0, "extra": 1}  # fmt: skip
    assert (await client.post("/v1/provider/send", json=sent_through_provider,
                              headers=ana)).status_code == 200  # fmt: skip
    assert (await read(client, "MEL1", ana))["_relation"]["command_log"] == {**first, "temp": 17}


async def test_a_new_owner_sees_no_reading_and_no_settings_of_the_old_one(runtime, client):
    ana_id, ana = await logged_in_user(runtime, client, ANA)
    _, bob = await logged_in_user(runtime, client, BOB)
    await make_controller(runtime, "MEL1", owner=ANA, type="melissa")
    await report(runtime, "MEL1", {"temp": 23.0})
    await make_commands(runtime, ana_id, "MEL1", 1, name="send_ir_code", fields=MELISSA_SETTINGS)
    mine = await read(client, "MEL1", ana)
    assert mine["controller_log"]["temp"] == 23.0
    assert mine["_relation"]["command_log"] == MELISSA_SETTINGS
    handed = await client.patch("/v1/controllers/MEL1/reassign", json={"owner": BOB}, headers=ana)
    assert handed.status_code == 200
    bobs = await read(client, "MEL1", bob)
    assert bobs["controller_log"] == []
    assert bobs["_relation"] == {"command_log": NO_SETTINGS_YET}
    listed = (await client.get("/v1/controllers", headers=bob)).json()["_embedded"]["controller"]
    assert [c["controller_log"] for c in listed] == [[]]
