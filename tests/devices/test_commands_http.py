"""POST/GET /controllers/{sn}/commands: native commands, strict, waited for, paged (§10)."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

import pytest

from devicecontrol.clock import utcnow
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
    set_online,
)
from tests.factories import logged_in_user, make_controller

pytestmark = SQLITE_ENOUGH

COMMANDS = "/v1/controllers/{}/commands"
COMMAND_FIELDS = {
    "id", "name", "params", "status", "created", "sent_at", "completed_at", "expires_at",
    "result", "error", "_links",
}  # fmt: skip
PLUG_ON = {"name": "switch_on_off", "params": {"state": "on"}}


def stamp(moment) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S")


async def test_create_is_201_with_location_and_the_command(runtime, client, clock):
    _, ana = await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, "MEL1", owner=ANA, type="melissa")
    body = {"name": "send_ir_code", "params": MELISSA_SETTINGS}
    response = await client.post(COMMANDS.format("MEL1"), json=body, headers=ana)
    assert response.status_code == 201, response.text
    assert response.headers["content-type"].startswith("application/hal+json")
    created = response.json()
    command = created["command"]
    (stored,) = await command_rows(runtime, "MEL1")
    path = f"/v1/controllers/MEL1/commands/{stored.public_id}"
    assert response.headers["location"] == path
    assert created["_links"] == {"self": {"href": path}}
    assert set(command) == COMMAND_FIELDS
    now = utcnow()
    assert command == {
        "id": stored.public_id, "name": "send_ir_code", "params": MELISSA_SETTINGS,
        "status": "queued", "created": stamp(now), "sent_at": None, "completed_at": None,
        "expires_at": stamp(now + timedelta(seconds=300)), "result": None, "error": None,
        "_links": {"self": {"href": path}},
    }  # fmt: skip
    read = await client.get(path, headers=ana)
    assert read.status_code == 200
    assert read.json() == created
    plain = await client.get(path.removeprefix("/v1"), headers=ana)
    assert plain.json() == created


async def test_create_without_the_v1_prefix_and_with_ttl(runtime, client, clock):
    _, ana = await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, "PLUG1", owner=ANA, type="smart_plug")
    for ttl, expected in [(1, 1), (86400, 86400), (60.0, 60), (None, 300)]:
        body = {**PLUG_ON, "ttl": ttl}
        response = await client.post("/controllers/PLUG1/commands", json=body, headers=ana)
        assert response.status_code == 201, response.text
        expires = response.json()["command"]["expires_at"]
        assert expires == stamp(utcnow() + timedelta(seconds=expected)), ttl


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({**PLUG_ON, "ttl": 0}, "ttl"),
        ({**PLUG_ON, "ttl": 86401}, "ttl"),
        ({**PLUG_ON, "ttl": 1.5}, "ttl"),
        ({**PLUG_ON, "ttl": "60"}, "ttl"),
        ({**PLUG_ON, "ttl": True}, "ttl"),
        ({"params": {"state": "on"}}, "name"),
        ({"name": 5, "params": {"state": "on"}}, "name"),
        ({"name": "switch_on_off", "params": ["on"]}, "params"),
        ({"name": "switch_on_off", "params": "on"}, "params"),
        ({**PLUG_ON, "priority": 1}, "priority"),  # natively, unknown fields are refused
        ({"name": "switch_on_off", "params": {"state": "on", "temp": 20}}, "temp"),
        ({"name": "switch_on_off", "params": {"state": "dim"}}, "state"),
        ({"name": "switch_on_off"}, "state"),
        ({"name": "send_ir_code", "params": MELISSA_SETTINGS}, "name"),
    ],
)
async def test_create_checks_the_body_strictly(runtime, client, body, field):
    _, ana = await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, "PLUG1", owner=ANA, type="smart_plug")
    response = await client.post(COMMANDS.format("PLUG1"), json=body, headers=ana)
    assert_problem(response, 400, field)
    assert await command_rows(runtime, "PLUG1") == []


async def test_one_answer_names_every_refused_field_of_the_body(runtime, client):
    _, ana = await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, "PLUG1", owner=ANA, type="smart_plug")
    body = {"name": "Switch", "params": ["on"], "ttl": 0, "priority": 1, "x" * 100: 2}
    response = await client.post(COMMANDS.format("PLUG1"), json=body, headers=ana)
    errors = assert_problem(response, 400)["errors"]
    assert errors == [
        {"field": "priority", "message": "is not a field of this request"},
        {"field": "x" * 64, "message": "is not a field of this request"},
        {"field": "name", "message": "must match [a-z][a-z0-9_]{0,63}"},
        {"field": "params", "message": "must be an object"},
        {"field": "ttl", "message": "must be whole seconds, 1 to 86400"},
    ]
    missing = await client.post(COMMANDS.format("PLUG1"), json={"name": None}, headers=ana)
    assert assert_problem(missing, 400)["errors"] == [{"field": "name", "message": "is required"}]


async def test_create_takes_integral_floats_for_catalogue_integers(runtime, client):
    _, ana = await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, "MEL1", owner=ANA, type="melissa")
    params = {"state": 1.0, "mode": 3, "temp": 22.0, "fan": 2.0}
    response = await client.post(
        COMMANDS.format("MEL1"), json={"name": "send_ir_code", "params": params}, headers=ana
    )
    assert response.status_code == 201, response.text
    assert response.json()["command"]["params"] == MELISSA_SETTINGS
    half = {**params, "temp": 22.5}
    refused = await client.post(
        COMMANDS.format("MEL1"), json={"name": "send_ir_code", "params": half}, headers=ana
    )
    assert_problem(refused, 400, "temp")


async def test_a_type_without_catalogue_takes_any_well_formed_name(runtime, client):
    _, ana = await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, "TH1", owner=ANA, type="thermostat")
    body = {"name": "set_point", "params": {"c": 21.5, "zones": [1, 2]}}
    response = await client.post(COMMANDS.format("TH1"), json=body, headers=ana)
    assert response.status_code == 201, response.text
    assert response.json()["command"]["params"] == body["params"]
    bad = await client.post(COMMANDS.format("TH1"), json={"name": "Set Point"}, headers=ana)
    assert_problem(bad, 400, "name")


@pytest.mark.parametrize(
    ("content", "content_type"),
    [(b'{"name": 1, "bogus": true}', "application/json"), (b"not json", "application/json"),
     (b"name=x", "text/plain")],
)  # fmt: skip
async def test_someone_elses_controller_is_404_whatever_the_body(
    runtime, client, content, content_type
):
    _, ana = await logged_in_user(runtime, client, ANA)
    await logged_in_user(runtime, client, BOB)
    await make_controller(runtime, "BOBS", owner=BOB)
    headers = {**ana, "Content-Type": content_type}
    others = await client.post(COMMANDS.format("BOBS"), content=content, headers=headers)
    unknown = await client.post(COMMANDS.format("NOPE"), content=content, headers=headers)
    assert_problem(others, 404)
    assert others.text == unknown.text.replace("NOPE", "BOBS")
    waiting = await client.post(COMMANDS.format("BOBS") + "?wait=99", json=PLUG_ON, headers=ana)
    assert_problem(waiting, 404)
    assert await command_rows(runtime, "BOBS") == []


async def test_reading_commands_of_someone_elses_controller_is_404(runtime, client):
    bob_id, _ = await logged_in_user(runtime, client, BOB)
    _, ana = await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, "BOBS", owner=BOB)
    (command,) = await make_commands(runtime, bob_id, "BOBS", 1)
    path = COMMANDS.format("BOBS")
    assert_problem(await client.get(path, headers=ana), 404)
    assert_problem(await client.get(f"{path}/{command.public_id}", headers=ana), 404)
    assert_problem(await client.get(f"{COMMANDS.format('NOPE')}/{command.public_id}"), 401)


async def test_unknown_or_malformed_command_ids_are_404(runtime, client):
    user_id, ana = await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, "P1", owner=ANA)
    await make_controller(runtime, "P2", owner=ANA)
    (command,) = await make_commands(runtime, user_id, "P1", 1)
    path = COMMANDS.format("P1")
    for missing in ["0" * 24, "ABCDEF", "x" * 33, "%00", "1%20OR%201=1"]:
        assert_problem(await client.get(f"{path}/{missing}", headers=ana), 404)
    # a command is found only under its own controller
    other = f"{COMMANDS.format('P2')}/{command.public_id}"
    assert_problem(await client.get(other, headers=ana), 404)


@pytest.mark.parametrize("wait", ["31", "-1", "1.5", "abc", "", "1e1", "00000000000000000000031"])
async def test_wait_must_be_whole_seconds_up_to_30(runtime, client, wait):
    _, ana = await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, "PLUG1", owner=ANA)
    response = await client.post(
        COMMANDS.format("PLUG1"), params={"wait": wait}, json=PLUG_ON, headers=ana
    )
    assert_problem(response, 400, "wait")
    assert await command_rows(runtime, "PLUG1") == []


async def test_wait_holds_the_answer_until_the_device_answers(runtime, settings):
    async with concurrent_client(settings) as http:
        _, ana = await logged_in_user(runtime, http, ANA)
        await make_controller(runtime, "PLUG1", owner=ANA)

        async def device() -> None:
            command = await next_unfinished(runtime, "PLUG1")
            await asyncio.sleep(0.2)
            await answer(runtime, "PLUG1", command.public_id, result={"relay_state": "on"})

        carried_out = asyncio.create_task(device())
        response = await http.post(COMMANDS.format("PLUG1") + "?wait=10", json=PLUG_ON, headers=ana)
        await carried_out
    assert response.status_code == 201, response.text
    command = response.json()["command"]
    assert command["status"] == "succeeded"
    assert command["result"] == {"relay_state": "on"}
    assert TIMESTAMP.match(command["sent_at"]) and TIMESTAMP.match(command["completed_at"])


async def test_wait_gives_up_after_that_many_seconds(runtime, settings):
    async with concurrent_client(settings) as http:
        _, ana = await logged_in_user(runtime, http, ANA)
        await make_controller(runtime, "PLUG1", owner=ANA)
        started = time.monotonic()
        response = await http.post(COMMANDS.format("PLUG1") + "?wait=1", json=PLUG_ON, headers=ana)
        waited = time.monotonic() - started
        unwaited = await http.post(COMMANDS.format("PLUG1") + "?wait=0", json=PLUG_ON, headers=ana)
    assert 1 <= waited < 3
    assert response.status_code == 201
    assert response.json()["command"]["status"] == "queued"
    assert unwaited.status_code == 201


async def test_status_shows_expired_on_any_read_after_expires_at(runtime, client, clock):
    user_id, ana = await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, "PLUG1", owner=ANA)
    response = await client.post(COMMANDS.format("PLUG1"), json={**PLUG_ON, "ttl": 5}, headers=ana)
    path = response.headers["location"]
    (sent,) = await make_commands(runtime, user_id, "PLUG1", 1, ttl_s=5)
    await deliver(runtime, "PLUG1", sent.public_id)
    clock.advance(4)
    assert (await client.get(path, headers=ana)).json()["command"]["status"] == "queued"
    clock.advance(1)  # expires_at itself: expired
    assert (await client.get(path, headers=ana)).json()["command"]["status"] == "expired"
    listed = (await client.get(COMMANDS.format("PLUG1"), headers=ana)).json()
    assert [c["status"] for c in listed["_embedded"]["command"]] == ["expired", "expired"]
    assert {c.status for c in await command_rows(runtime, "PLUG1")} == {"queued", "sent"}


async def test_finished_commands_show_their_result_and_times(runtime, client, clock):
    user_id, ana = await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, "PLUG1", owner=ANA)
    ok, bad = await make_commands(runtime, user_id, "PLUG1", 2)
    clock.advance(3)
    await answer(runtime, "PLUG1", ok.public_id, result={"relay_state": "on"})
    await answer(runtime, "PLUG1", bad.public_id, "failed", error="relay stuck")
    clock.advance(600)  # finished commands never expire
    listed = (await client.get(COMMANDS.format("PLUG1"), headers=ana)).json()
    newest, oldest = listed["_embedded"]["command"]
    assert (newest["status"], newest["error"], newest["result"]) == ("failed", "relay stuck", None)
    assert (oldest["status"], oldest["result"]) == ("succeeded", {"relay_state": "on"})
    answered = stamp(ok.created_at + timedelta(seconds=3))
    assert oldest["sent_at"] == oldest["completed_at"] == answered


def query(href: str) -> dict[str, list[str]]:
    parts = urlsplit(href)
    assert parts.path == "/v1/controllers/PLUG1/commands", href
    return parse_qs(parts.query)


async def test_commands_are_listed_newest_first_and_paged_like_the_list(runtime, client):
    user_id, ana = await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, "PLUG1", owner=ANA)
    made = [c.public_id for c in await make_commands(runtime, user_id, "PLUG1", 5)]
    everything = (await client.get(COMMANDS.format("PLUG1"), headers=ana)).json()
    assert [c["id"] for c in everything["_embedded"]["command"]] == made[::-1]
    assert (everything["total"], everything["page_size"], everything["page_count"]) == (5, 100, 1)
    page = await client.get(COMMANDS.format("PLUG1") + "?page=2&page_size=2", headers=ana)
    body = page.json()
    assert [c["id"] for c in body["_embedded"]["command"]] == [made[2], made[1]]
    assert (body["total"], body["page"], body["page_size"], body["page_count"]) == (5, 2, 2, 3)
    links = {name: query(link["href"]) for name, link in body["_links"].items()}
    assert links == {
        "self": {"page": ["2"], "page_size": ["2"]},
        "first": {"page": ["1"], "page_size": ["2"]},
        "last": {"page": ["3"], "page_size": ["2"]},
        "prev": {"page": ["1"], "page_size": ["2"]},
        "next": {"page": ["3"], "page_size": ["2"]},
    }
    item = body["_embedded"]["command"][0]
    assert item["_links"] == {"self": {"href": f"/v1/controllers/PLUG1/commands/{made[2]}"}}
    for past in ("4", str(2**63 - 1)):
        beyond = (await client.get(f"{COMMANDS.format('PLUG1')}?page={past}&page_size=2",
                                   headers=ana)).json()  # fmt: skip
        assert (beyond["_embedded"]["command"], beyond["total"]) == ([], 5)
    for bad in ("page=0", "page=x", "page_size=501", "page_size=2.0"):
        response = await client.get(f"{COMMANDS.format('PLUG1')}?{bad}", headers=ana)
        assert_problem(response, 400, bad.split("=")[0])


async def test_no_commands_is_an_empty_page(runtime, client):
    _, ana = await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, "PLUG1", owner=ANA)
    body = (await client.get("/controllers/PLUG1/commands", headers=ana)).json()
    assert body["_embedded"] == {"command": []}
    assert (body["total"], body["page"], body["page_count"]) == (0, 1, 1)
    assert set(body["_links"]) == {"self", "first", "last"}


async def test_100_unfinished_commands_is_the_limit(runtime, client, clock):
    user_id, ana = await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, "PLUG1", owner=ANA)
    made = await make_commands(runtime, user_id, "PLUG1", 100)
    refused = await client.post(COMMANDS.format("PLUG1"), json=PLUG_ON, headers=ana)
    assert_problem(refused, 429)
    assert "retry-after" in refused.headers
    await answer(runtime, "PLUG1", made[0].public_id)  # one finishes: room for one more
    assert (await client.post(COMMANDS.format("PLUG1"), json=PLUG_ON, headers=ana)).is_success
    assert_problem(await client.post(COMMANDS.format("PLUG1"), json=PLUG_ON, headers=ana), 429)


async def test_after_a_hand_over_the_old_commands_are_failed_and_hidden(runtime, client):
    ana_id, ana = await logged_in_user(runtime, client, ANA)
    _, bob = await logged_in_user(runtime, client, BOB)
    await make_controller(runtime, "PLUG1", owner=ANA)
    await set_online(runtime, "PLUG1", False)
    old_done, old_open = await make_commands(runtime, ana_id, "PLUG1", 2)
    await answer(runtime, "PLUG1", old_done.public_id)
    handed = await client.patch("/v1/controllers/PLUG1/reassign", json={"owner": BOB},
                                headers=ana)  # fmt: skip
    assert handed.status_code == 200
    listed = (await client.get(COMMANDS.format("PLUG1"), headers=bob)).json()
    assert (listed["_embedded"]["command"], listed["total"]) == ([], 0)
    for command in (old_done, old_open):
        path = f"{COMMANDS.format('PLUG1')}/{command.public_id}"
        assert_problem(await client.get(path, headers=bob), 404)
        assert_problem(await client.get(path, headers=ana), 404)
    stored = {c.public_id: (c.status, c.error) for c in await command_rows(runtime, "PLUG1")}
    assert stored == {
        old_done.public_id: ("succeeded", None),
        old_open.public_id: ("failed", "owner changed"),
    }
    mine = await client.post(COMMANDS.format("PLUG1"), json=PLUG_ON, headers=bob)
    listed = (await client.get(COMMANDS.format("PLUG1"), headers=bob)).json()
    assert [c["id"] for c in listed["_embedded"]["command"]] == [mine.json()["command"]["id"]]
