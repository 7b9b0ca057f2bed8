"""POST /provider/send and /provider/fetch: the original API's device endpoints (§10)."""

from __future__ import annotations

import asyncio
import dataclasses
import time

import pytest

from tests.conftest import SQLITE_ENOUGH
from tests.controllers.helpers import TIMESTAMP, assert_problem, concurrent_client
from tests.devices.helpers import (
    ANA,
    BOB,
    MELISSA_SETTINGS,
    answer,
    command_rows,
    deliver,
    make_commands,
    next_unfinished,
    report,
    set_online,
)
from tests.factories import logged_in_user, make_controller

pytestmark = SQLITE_ENOUGH

SEND, FETCH = "/v1/provider/send", "/v1/provider/fetch"


def ir_code(serial: str = "MEL1", **changes: object) -> dict[str, object]:
    return {"serial_number": serial, "command": "send_ir_code", **MELISSA_SETTINGS, **changes}


async def test_send_to_an_offline_device_answers_at_once_with_the_queued_command(runtime, client):
    _, ana = await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, "MEL1", owner=ANA, type="melissa")
    await set_online(runtime, "MEL1", False)
    started = time.monotonic()
    response = await client.post(SEND, json=ir_code(), headers=ana)
    assert time.monotonic() - started < 1.5  # SEND_WAIT_MS is 3000 by default
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/hal+json")
    body = response.json()
    assert body["_links"] == {"self": {"href": "/v1/provider/send"}}
    provider = body["provider"]
    (stored,) = await command_rows(runtime, "MEL1")
    assert provider == {
        "_id": stored.public_id,
        "status": "queued",
        "commandName": "send_ir_code",
        "commandParams": MELISSA_SETTINGS,
        "deviceId": "MEL1",
        "createdAt": stored.created_at.strftime("%Y-%m-%d %H:%M:%S"),
    }
    assert TIMESTAMP.match(provider["createdAt"])


async def test_send_without_the_v1_prefix_works_too(runtime, client):
    _, ana = await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, "PLUG1", owner=ANA, type="smart_plug")
    body = {"serial_number": "PLUG1", "command": "switch_on_off", "state": "off"}
    response = await client.post("/provider/send", json=body, headers=ana)
    assert response.status_code == 200, response.text
    assert response.json()["provider"]["commandParams"] == {"state": "off"}


@pytest.mark.parametrize(
    "body",
    [
        {"command": "send_ir_code", "temp": 99},  # a bad value
        {"command": "no_such_command"},
        {},  # no command at all
    ],
)
async def test_send_to_someone_elses_or_an_unknown_controller_is_404_before_the_body(
    runtime, client, body
):
    _, ana = await logged_in_user(runtime, client, ANA)
    await logged_in_user(runtime, client, BOB)
    await make_controller(runtime, "BOBS", owner=BOB, type="melissa")
    others = await client.post(SEND, json={"serial_number": "BOBS", **body}, headers=ana)
    unknown = await client.post(SEND, json={"serial_number": "NOPE", **body}, headers=ana)
    assert_problem(others, 404)
    assert_problem(unknown, 404)
    assert others.text == unknown.text.replace("NOPE", "BOBS")
    assert await command_rows(runtime, "BOBS") == []


@pytest.mark.parametrize("serial", [None, 42, "", ["MEL1"]])
async def test_send_without_a_string_serial_number_is_400(runtime, client, serial):
    _, ana = await logged_in_user(runtime, client, ANA)
    body = {"command": "send_ir_code"} if serial is None else {"serial_number": serial}
    assert_problem(await client.post(SEND, json=body, headers=ana), 400, "serial_number")


@pytest.mark.parametrize(
    ("kind", "fields", "field"),
    [
        ("melissa", {"command": "send_ir_code", **MELISSA_SETTINGS, "temp": 31}, "temp"),
        ("melissa", {"command": "send_ir_code", **MELISSA_SETTINGS, "temp": 15}, "temp"),
        ("melissa", {"command": "send_ir_code", **MELISSA_SETTINGS, "temp": 22.5}, "temp"),
        ("melissa", {"command": "send_ir_code", **MELISSA_SETTINGS, "state": 3}, "state"),
        ("melissa", {"command": "send_ir_code", **MELISSA_SETTINGS, "mode": 5}, "mode"),
        ("melissa", {"command": "send_ir_code", **MELISSA_SETTINGS, "fan": "high"}, "fan"),
        ("melissa", {"command": "send_ir_code", **MELISSA_SETTINGS, "fan": True}, "fan"),
        ("melissa", {"command": "send_ir_code", "state": 1, "mode": 0, "temp": 20}, "fan"),
        ("melissa", {"command": "switch_on_off", "state": "on"}, "command"),
        ("smart_plug", {"command": "switch_on_off", "state": 1}, "state"),
        ("smart_plug", {"command": "switch_on_off"}, "state"),
        ("smart_plug", {"command": "send_ir_code", **MELISSA_SETTINGS}, "command"),
        ("bobbie", {"command": "default_state", "state": 3}, "state"),
        ("bobbie", {"command": "switch_on_off", "state": "dim"}, "state"),
        ("vicki", {"command": "set_keepalive_time", "time": 0}, "time"),
        ("vicki", {"command": "set_keepalive_time", "time": 256}, "time"),
        ("thermostat", {"command": "Set-Temp"}, "command"),  # no catalogue: any good name
        ("melissa", {"command": 7}, "command"),
        ("melissa", {"command": ""}, "command"),
    ],
)
async def test_send_outside_the_catalogue_is_400_naming_the_field(
    runtime, client, kind, fields, field
):
    _, ana = await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, "DEV1", owner=ANA, type=kind)
    response = await client.post(SEND, json={"serial_number": "DEV1", **fields}, headers=ana)
    assert_problem(response, 400, field)
    assert await command_rows(runtime, "DEV1") == []


@pytest.mark.parametrize(
    ("kind", "fields", "params"),
    [
        ("melissa", {"command": "turn_led_off"}, {}),
        ("melissa", {"command": "reset_color"}, {}),
        ("smart_plug", {"command": "switch_on_off", "state": "on"}, {"state": "on"}),
        ("bobbie", {"command": "default_state", "state": 2}, {"state": 2}),
        ("bobbie", {"command": "led_on_off"}, {}),
        ("vicki", {"command": "set_keepalive_time", "time": 255}, {"time": 255}),
        ("vicki", {"command": "set_keepalive_time", "time": 1.0}, {"time": 1}),
        ("thermostat", {"command": "set_point", "c": 21.5}, {"c": 21.5}),
    ],
)
async def test_send_within_the_catalogue_stores_the_commands_params(
    runtime, client, kind, fields, params
):
    _, ana = await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, "DEV1", owner=ANA, type=kind)
    response = await client.post(SEND, json={"serial_number": "DEV1", **fields}, headers=ana)
    assert response.status_code == 200, response.text
    assert response.json()["provider"]["commandParams"] == params
    (stored,) = await command_rows(runtime, "DEV1")
    assert (stored.name, stored.status) == (fields["command"], "queued")


async def test_integral_floats_count_as_integers_and_are_stored_as_integers(runtime, client):
    _, ana = await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, "MEL1", owner=ANA, type="melissa")
    body = ir_code(state=1.0, mode=3.0, temp=22.0, fan=2.0)  # as Home Assistant sends them
    response = await client.post(SEND, json=body, headers=ana)
    assert response.status_code == 200, response.text
    params = response.json()["provider"]["commandParams"]
    assert params == MELISSA_SETTINGS
    assert all(type(value) is int for value in params.values())
    assert '"temp":22,' in response.text.replace(" ", "")


async def test_fields_the_command_does_not_take_are_ignored(runtime, client):
    """Home Assistant sends the whole command_log back with its change."""
    _, ana = await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, "MEL1", owner=ANA, type="melissa")
    await make_controller(runtime, "PLUG1", owner=ANA, type="smart_plug")
    extras = {"humidity": 40, "created": "2026-11-21 10:00:00", "id": None, "online": "yes"}
    melissa = await client.post(SEND, json=ir_code(**extras), headers=ana)
    assert melissa.json()["provider"]["commandParams"] == MELISSA_SETTINGS
    plug = {"serial_number": "PLUG1", "command": "switch_on_off", "state": "on", "temp": 99}
    response = await client.post(SEND, json=plug, headers=ana)
    assert response.json()["provider"]["commandParams"] == {"state": "on"}


async def test_send_beyond_100_unfinished_commands_is_429_until_some_expire(runtime, client, clock):
    user_id, ana = await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, "PLUG1", owner=ANA, type="smart_plug")
    await make_commands(runtime, user_id, "PLUG1", 99, ttl_s=60)
    body = {"serial_number": "PLUG1", "command": "switch_on_off", "state": "on"}
    assert (await client.post(SEND, json=body, headers=ana)).status_code == 200  # the 100th
    refused = await client.post(SEND, json=body, headers=ana)
    assert_problem(refused, 429)
    assert int(refused.headers["retry-after"]) >= 1
    assert len(await command_rows(runtime, "PLUG1")) == 100
    clock.advance(61)  # the 99 expire (the 100th, made with the default 300 s, does not)
    assert (await client.post(SEND, json=body, headers=ana)).status_code == 200


async def test_send_to_an_online_device_waits_for_its_result(runtime, settings):
    async with concurrent_client(settings) as http:
        _, ana = await logged_in_user(runtime, http, ANA)
        await make_controller(runtime, "MEL1", owner=ANA, type="melissa")
        await set_online(runtime, "MEL1", True)

        async def device() -> None:
            command = await next_unfinished(runtime, "MEL1")
            await answer(runtime, "MEL1", command.public_id, result={"applied": True})

        carried_out = asyncio.create_task(device())
        response = await http.post(SEND, json=ir_code(), headers=ana)
        await carried_out
    assert response.status_code == 200, response.text
    assert response.json()["provider"]["status"] == "succeeded"


async def test_a_failed_result_is_the_answer_too(runtime, settings):
    async with concurrent_client(settings) as http:
        _, ana = await logged_in_user(runtime, http, ANA)
        await make_controller(runtime, "PLUG1", owner=ANA, type="smart_plug")
        await set_online(runtime, "PLUG1", True)

        async def device() -> None:
            command = await next_unfinished(runtime, "PLUG1")
            await answer(runtime, "PLUG1", command.public_id, "failed", error="relay stuck")

        carried_out = asyncio.create_task(device())
        body = {"serial_number": "PLUG1", "command": "switch_on_off", "state": "on"}
        response = await http.post(SEND, json=body, headers=ana)
        await carried_out
    assert response.json()["provider"]["status"] == "failed"


@pytest.mark.parametrize("delivered", [False, True])
async def test_an_online_device_that_does_not_answer_in_time_leaves_it_queued_or_sent(
    runtime, settings, delivered
):
    quick = dataclasses.replace(settings, send_wait_ms=400)
    async with concurrent_client(quick) as http:
        _, ana = await logged_in_user(runtime, http, ANA)
        await make_controller(runtime, "MEL1", owner=ANA, type="melissa")
        await set_online(runtime, "MEL1", True)

        async def link() -> None:  # publishes it, but the device never answers
            command = await next_unfinished(runtime, "MEL1")
            await deliver(runtime, "MEL1", command.public_id)

        publishing = asyncio.create_task(link()) if delivered else None
        started = time.monotonic()
        response = await http.post(SEND, json=ir_code(), headers=ana)
        waited = time.monotonic() - started
        if publishing is not None:
            await publishing
    assert 0.4 <= waited < 2.5
    assert response.json()["provider"]["status"] == ("sent" if delivered else "queued")


async def test_fetch_before_any_reading_holds_online_alone(runtime, client):
    _, ana = await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, "MEL1", owner=ANA, type="melissa")
    await set_online(runtime, "MEL1", True)
    response = await client.post(FETCH, json={"serial_number": "MEL1"}, headers=ana)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/hal+json")
    assert response.json() == {
        "provider": {"online": True},
        "_links": {"self": {"href": "/v1/provider/fetch"}},
    }


async def test_fetch_shows_the_latest_reading_and_the_links_online_wins(runtime, client, clock):
    _, ana = await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, "MEL1", owner=ANA, type="melissa")
    await report(runtime, "MEL1", {"temp": 20.0, "humidity": 50.0})
    clock.advance(10)
    await report(runtime, "MEL1", {"temp": 21.5, "humidity": 40.2, "online": True})
    await set_online(runtime, "MEL1", False)
    fetched = await client.post("/provider/fetch", json={"serial_number": "MEL1"}, headers=ana)
    assert fetched.json()["provider"] == {"temp": 21.5, "humidity": 40.2, "online": False}
    await set_online(runtime, "MEL1", True)
    await report(runtime, "MEL1", {"temp": 21.0, "online": False})
    fetched = await client.post(FETCH, json={"serial_number": "MEL1"}, headers=ana)
    assert fetched.json()["provider"] == {"temp": 21.0, "online": True}


async def test_fetch_of_someone_elses_or_an_unknown_controller_is_404(runtime, client):
    _, ana = await logged_in_user(runtime, client, ANA)
    await logged_in_user(runtime, client, BOB)
    await make_controller(runtime, "BOBS", owner=BOB, type="melissa")
    await report(runtime, "BOBS", {"temp": 19.0})
    others = await client.post(FETCH, json={"serial_number": "BOBS"}, headers=ana)
    unknown = await client.post(FETCH, json={"serial_number": "NOPE"}, headers=ana)
    assert_problem(others, 404)
    assert others.text == unknown.text.replace("NOPE", "BOBS")
    assert_problem(await client.post(FETCH, json={}, headers=ana), 400, "serial_number")


async def test_after_a_hand_over_the_new_owner_sees_nothing_of_the_old_one(runtime, client):
    _, ana = await logged_in_user(runtime, client, ANA)
    _, bob = await logged_in_user(runtime, client, BOB)
    await make_controller(runtime, "MEL1", owner=ANA, type="melissa")
    await report(runtime, "MEL1", {"temp": 23.0})
    assert (await client.post(SEND, json=ir_code(), headers=ana)).status_code == 200
    handed = await client.patch("/v1/controllers/MEL1/reassign", json={"owner": BOB}, headers=ana)
    assert handed.status_code == 200, handed.text
    fetched = await client.post(FETCH, json={"serial_number": "MEL1"}, headers=bob)
    assert fetched.json()["provider"] == {"online": False}
    (old,) = await command_rows(runtime, "MEL1")
    assert (old.status, old.error) == ("failed", "owner changed")
    assert_problem(await client.post(FETCH, json={"serial_number": "MEL1"}, headers=ana), 404)
    assert_problem(await client.post(SEND, json=ir_code(), headers=ana), 404)
