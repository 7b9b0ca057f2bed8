"""PATCH /controllers/{serial_number}/reassign: the owner hands a controller to another account."""

from __future__ import annotations

import itertools

import pytest

from devicecontrol.users.service import disable_user
from tests.conftest import SQLITE_ENOUGH
from tests.controllers.helpers import (
    RECORD_FIELDS,
    TIMESTAMP,
    active_rows,
    assert_problem,
    assignment_rows,
    controller_row,
)
from tests.factories import logged_in_user, make_controller, make_user

pytestmark = SQLITE_ENOUGH

ANA = "ana@example.com"
BOB = "bob@example.com"


def reassign_url(serial: str) -> str:
    return f"/v1/controllers/{serial}/reassign"


async def ana_owns_one(runtime, client, serial: str = "ROOM01") -> tuple[int, dict[str, str]]:
    """Ana, logged in, owning a controller that sits in her room 5."""
    ana_id, ana = await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, serial, owner=ANA, room_id=5)
    return ana_id, ana


BAD_OWNER_BODIES = [
    None, {}, {"owner": None}, {"owner": ""}, {"owner": 7}, {"owner": ["bob@example.com"]},
    {"owner": "bob"}, {"owner": "bob@example"}, {"owner": "bob @example.com"},
    {"owner": "a@b@example.com"}, {"owner": "x" * 250 + "@example.com"}, {"new_owner": BOB},
]  # fmt: skip


@pytest.mark.parametrize("body", BAD_OWNER_BODIES)
async def test_reassign_with_missing_or_malformed_owner_is_400_naming_owner(runtime, client, body):
    ana_id, ana = await ana_owns_one(runtime, client)
    await make_user(runtime, BOB)
    kwargs = {} if body is None else {"json": body}
    response = await client.patch(reassign_url("ROOM01"), headers=ana, **kwargs)
    assert_problem(response, 400, "owner")
    assert (await controller_row(runtime, "ROOM01")).user_id == ana_id


async def test_reassign_with_a_form_body_is_415(runtime, client):
    ana_id, ana = await ana_owns_one(runtime, client)
    await make_user(runtime, BOB)
    headers = {**ana, "Content-Type": "application/x-www-form-urlencoded"}
    response = await client.patch(reassign_url("ROOM01"), headers=headers, content=b"owner=b")
    assert_problem(response, 415)
    assert (await controller_row(runtime, "ROOM01")).user_id == ana_id


async def test_reassign_by_someone_who_is_not_the_owner_is_404(runtime, client):
    _, ana = await logged_in_user(runtime, client, ANA)
    bob_id, _ = await logged_in_user(runtime, client, BOB)
    await make_user(runtime, "cem@example.com")
    await make_controller(runtime, "BOB001", owner=BOB)
    await make_controller(runtime, "FREE01")
    body = {"owner": "cem@example.com"}
    others = await client.patch(reassign_url("BOB001"), headers=ana, json=body)
    unowned = await client.patch(reassign_url("FREE01"), headers=ana, json=body)
    unknown = await client.patch(reassign_url("NOPE01"), headers=ana, json=body)
    for response in (others, unowned, unknown):
        assert_problem(response, 404)
    assert others.text == unknown.text.replace("NOPE01", "BOB001")
    assert (await controller_row(runtime, "BOB001")).user_id == bob_id
    assert (await controller_row(runtime, "FREE01")).user_id is None
    assert await assignment_rows(runtime, "FREE01") == []


async def test_reassign_to_an_unknown_account_is_422_naming_owner(runtime, client):
    ana_id, ana = await ana_owns_one(runtime, client)
    before = await assignment_rows(runtime, "ROOM01")
    response = await client.patch(
        reassign_url("ROOM01"), headers=ana, json={"owner": "nobody@example.com"}
    )
    assert_problem(response, 422, "owner")
    assert (await controller_row(runtime, "ROOM01")).user_id == ana_id
    assert await assignment_rows(runtime, "ROOM01") == before


async def test_reassign_to_a_disabled_account_is_422_naming_owner(runtime, client):
    ana_id, ana = await ana_owns_one(runtime, client)
    await make_user(runtime, BOB)
    await disable_user(runtime, BOB)
    response = await client.patch(reassign_url("ROOM01"), headers=ana, json={"owner": BOB})
    assert_problem(response, 422, "owner")
    assert (await controller_row(runtime, "ROOM01")).user_id == ana_id
    assert len(await assignment_rows(runtime, "ROOM01")) == 1


@pytest.mark.parametrize("owner", [ANA, "ANA@Example.COM"])
async def test_reassign_to_myself_returns_the_current_record_and_changes_nothing(
    runtime, client, owner
):
    ana_id, ana = await ana_owns_one(runtime, client)
    [record] = await assignment_rows(runtime, "ROOM01")
    response = await client.patch(reassign_url("ROOM01"), headers=ana, json={"owner": owner})
    assert response.status_code == 200, response.text
    body = response.json()["controller_reassign"]
    assert (body["id"], body["user_id"], body["deleted_at"]) == (record.id, ana_id, None)
    assert await assignment_rows(runtime, "ROOM01") == [record]
    controller = await controller_row(runtime, "ROOM01")
    assert (controller.user_id, controller.room_id) == (ana_id, 5)


async def test_reassign_closes_the_old_record_and_opens_one_for_the_new_owner(runtime, client):
    ana_id, ana = await ana_owns_one(runtime, client)
    bob_id = await make_user(runtime, BOB)
    [old] = await assignment_rows(runtime, "ROOM01")
    response = await client.patch(reassign_url("ROOM01"), headers=ana, json={"owner": BOB})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/hal+json")
    body = response.json()
    assert body["_links"] == {"self": {"href": "/v1/controllers/ROOM01/assign"}}
    record = body["controller_reassign"]
    assert set(record) == RECORD_FIELDS
    assert record["id"] != old.id
    assert (record["user_id"], record["room_id"], record["deleted_at"]) == (bob_id, None, None)
    assert (record["serial_number"], record["status_push"]) == ("ROOM01", 0)
    assert TIMESTAMP.match(record["created"]) and TIMESTAMP.match(record["assigned_at"])
    closed, new = await assignment_rows(runtime, "ROOM01")
    assert (closed.id, closed.user_id) == (old.id, ana_id) and closed.deleted_at is not None
    assert (new.id, new.user_id, new.deleted_at) == (record["id"], bob_id, None)
    controller = await controller_row(runtime, "ROOM01")
    assert (controller.user_id, controller.room_id) == (bob_id, None)


async def test_reassign_matches_the_new_owner_case_insensitively(runtime, client):
    _, ana = await ana_owns_one(runtime, client)
    bob_id = await make_user(runtime, BOB)
    response = await client.patch(
        reassign_url("ROOM01"), headers=ana, json={"owner": "Bob@EXAMPLE.com"}
    )
    assert response.status_code == 200, response.text
    assert response.json()["controller_reassign"]["user_id"] == bob_id
    assert (await controller_row(runtime, "ROOM01")).user_id == bob_id


async def test_after_reassign_the_old_owner_gets_404_and_the_new_owner_sees_it(runtime, client):
    _, ana = await ana_owns_one(runtime, client)
    bob_id, bob = await logged_in_user(runtime, client, BOB)
    await client.patch(reassign_url("ROOM01"), headers=ana, json={"owner": BOB})
    assert_problem(await client.get("/v1/controllers/ROOM01", headers=ana), 404)
    assert (await client.get("/v1/controllers", headers=ana)).json()["total"] == 0
    assert_problem(
        await client.patch(reassign_url("ROOM01"), headers=ana, json={"owner": ANA}), 404
    )
    assert_problem(await client.post("/v1/controllers/ROOM01/assign", headers=ana), 409)
    seen = (await client.get("/v1/controllers/ROOM01", headers=bob)).json()["controller"]
    assert (seen["user_id"], seen["room_id"]) == (bob_id, None)
    listed = (await client.get("/v1/controllers", headers=bob)).json()["_embedded"]["controller"]
    assert [c["serial_number"] for c in listed] == ["ROOM01"]


async def test_reassigns_leave_a_chain_of_records_with_one_active(runtime, client):
    ana_id, ana = await ana_owns_one(runtime, client)
    bob_id, bob = await logged_in_user(runtime, client, BOB)
    cem_id = await make_user(runtime, "cem@example.com")
    first = await client.patch(reassign_url("ROOM01"), headers=ana, json={"owner": BOB})
    second = await client.patch(
        reassign_url("ROOM01"), headers=bob, json={"owner": "cem@example.com"}
    )
    assert (first.status_code, second.status_code) == (200, 200)
    chain = await assignment_rows(runtime, "ROOM01")
    assert [r.user_id for r in chain] == [ana_id, bob_id, cem_id]
    assert [r.deleted_at is None for r in chain] == [False, False, True]
    for earlier, later in itertools.pairwise(chain):
        assert earlier.deleted_at <= later.assigned_at
    assert [r.id for r in await active_rows(runtime, "ROOM01")] == [
        second.json()["controller_reassign"]["id"]
    ]
