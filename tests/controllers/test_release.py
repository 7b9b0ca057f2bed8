"""DELETE /controllers/{serial_number}/assign: the owner releases a controller.

The active record gets ``deleted_at``, the controller loses its owner and its room, and it
can be claimed again (by anyone; a claim code, if provisioned, is still required).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select

from devicecontrol.clock import format_timestamp
from devicecontrol.database.tables import controller_assignments, controllers
from devicecontrol.runtime import Runtime
from tests.conftest import SQLITE_ENOUGH
from tests.controllers.helpers import (
    RECORD_FIELDS,
    TIMESTAMP,
    active_rows,
    assert_problem,
    assignment_rows,
    controller_row,
)
from tests.factories import logged_in_user, make_controller

pytestmark = SQLITE_ENOUGH

ANA = "ana@example.com"
BOB = "bob@example.com"


def assign_url(serial: str, *, prefix: str = "/v1") -> str:
    return f"{prefix}/controllers/{serial}/assign"


def near_now(timestamp: str) -> bool:
    moment = datetime.strptime(timestamp, "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC)
    return abs(datetime.now(UTC) - moment) < timedelta(minutes=1)


async def snapshot(runtime: Runtime) -> tuple[list, list]:
    """Every controller and every assignment record, to prove a request changed nothing."""
    async with runtime.database.read() as connection:
        rows = (await connection.execute(select(controllers).order_by(controllers.c.id))).all()
        records = (
            await connection.execute(
                select(controller_assignments).order_by(controller_assignments.c.id)
            )
        ).all()
    return list(rows), list(records)


async def ana_owns_one(runtime, client, serial: str = "ROOM01", **fields):
    """Ana, logged in, owning a controller that sits in her room 5."""
    ana_id, ana = await logged_in_user(runtime, client, ANA)
    fields.setdefault("room_id", 5)
    await make_controller(runtime, serial, owner=ANA, **fields)
    return ana_id, ana


async def test_release_closes_the_record_and_leaves_the_controller_unowned(runtime, client):
    ana_id, ana = await ana_owns_one(
        runtime, client, mac="0011223344AA", type="vicki", name="Porch",
        firmware_version="3.1", device_group="outdoor",
    )  # fmt: skip
    [before] = await assignment_rows(runtime, "ROOM01")
    response = await client.delete(assign_url("ROOM01"), headers=ana)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/hal+json")
    body = response.json()
    assert set(body) == {"controller_reassign", "_links"}
    assert body["_links"] == {"self": {"href": "/v1/controllers/ROOM01/assign"}}
    record = body["controller_reassign"]
    assert set(record) == RECORD_FIELDS
    [closed] = await assignment_rows(runtime, "ROOM01")
    assert closed.id == before.id and closed.deleted_at is not None
    assert record == {
        "id": before.id, "user_id": ana_id, "serial_number": "ROOM01",
        "mac": "0011223344AA", "firmware_version": "3.1", "name": "Porch", "type": "vicki",
        "device_group": "outdoor", "status_push": 0, "room_id": 5,
        "created": format_timestamp(before.created_at),
        "assigned_at": format_timestamp(before.assigned_at),
        "deleted_at": format_timestamp(closed.deleted_at),
    }  # fmt: skip
    for stamp in (record["created"], record["assigned_at"], record["deleted_at"]):
        assert TIMESTAMP.match(stamp), stamp
    assert near_now(record["deleted_at"])
    assert closed.assigned_at <= closed.deleted_at
    # only deleted_at changed on the record
    unchanged = {k: v for k, v in before._mapping.items() if k != "deleted_at"}
    assert {k: v for k, v in closed._mapping.items() if k != "deleted_at"} == unchanged
    controller = await controller_row(runtime, "ROOM01")
    assert (controller.user_id, controller.room_id) == (None, None)
    assert await active_rows(runtime, "ROOM01") == []


async def test_release_touches_only_the_released_controller(runtime, client):
    ana_id, ana = await ana_owns_one(runtime, client)
    await make_controller(runtime, "KEEP01", owner=ANA, room_id=7)
    keep_before = await controller_row(runtime, "KEEP01")
    keep_records = await assignment_rows(runtime, "KEEP01")
    assert (await client.delete(assign_url("ROOM01"), headers=ana)).status_code == 200
    assert await controller_row(runtime, "KEEP01") == keep_before
    assert await assignment_rows(runtime, "KEEP01") == keep_records
    listed = (await client.get("/v1/controllers", headers=ana)).json()["_embedded"]["controller"]
    assert [c["serial_number"] for c in listed] == ["KEEP01"]
    assert listed[0]["user_id"] == ana_id


async def test_after_release_the_previous_owner_no_longer_sees_it(runtime, client):
    _, ana = await ana_owns_one(runtime, client)
    assert (await client.get("/v1/controllers", headers=ana)).json()["total"] == 1
    assert (await client.delete(assign_url("ROOM01"), headers=ana)).status_code == 200
    assert_problem(await client.get("/v1/controllers/ROOM01", headers=ana), 404)
    listed = (await client.get("/v1/controllers", headers=ana)).json()
    assert (listed["total"], listed["_embedded"]["controller"]) == (0, [])
    assert_problem(await client.get("/v1/controllers/ROOM01/assignments", headers=ana), 404)
    assert_problem(
        await client.patch("/v1/controllers/ROOM01/reassign", headers=ana, json={"owner": BOB}),
        404,
    )


async def test_after_release_another_user_can_assign_it_with_a_new_record(runtime, client):
    ana_id, ana = await ana_owns_one(runtime, client)
    bob_id, bob = await logged_in_user(runtime, client, BOB)
    [old] = await assignment_rows(runtime, "ROOM01")
    assert_problem(await client.post(assign_url("ROOM01"), headers=bob), 409)
    released = (await client.delete(assign_url("ROOM01"), headers=ana)).json()
    response = await client.post(assign_url("ROOM01"), headers=bob)
    assert response.status_code == 200, response.text
    record = response.json()["controller_reassign"]
    assert record["id"] != old.id
    assert (record["user_id"], record["room_id"], record["deleted_at"]) == (bob_id, None, None)
    closed, new = await assignment_rows(runtime, "ROOM01")
    assert (closed.id, closed.user_id) == (old.id, ana_id)
    assert format_timestamp(closed.deleted_at) == released["controller_reassign"]["deleted_at"]
    assert (new.id, new.user_id, new.deleted_at) == (record["id"], bob_id, None)
    assert closed.deleted_at <= new.assigned_at
    controller = await controller_row(runtime, "ROOM01")
    assert (controller.user_id, controller.room_id) == (bob_id, None)
    seen = (await client.get("/v1/controllers/ROOM01", headers=bob)).json()["controller"]
    assert seen["user_id"] == bob_id
    history = (await client.get("/v1/controllers/ROOM01/assignments", headers=bob)).json()
    items = history["_embedded"]["controller_reassign"]
    assert [(r["id"], r["user_id"]) for r in items] == [(new.id, bob_id), (old.id, ana_id)]
    assert items[0]["deleted_at"] is None and items[1]["deleted_at"] is not None
    # and Ana, who gave it up, is now refused like any other non-owner
    assert_problem(await client.post(assign_url("ROOM01"), headers=ana), 409)


async def test_the_releasing_owner_may_claim_it_back_as_a_new_record(runtime, client):
    ana_id, ana = await ana_owns_one(runtime, client)
    [old] = await assignment_rows(runtime, "ROOM01")
    assert (await client.delete(assign_url("ROOM01"), headers=ana)).status_code == 200
    response = await client.post(assign_url("ROOM01"), headers=ana)
    assert response.status_code == 200, response.text
    record = response.json()["controller_reassign"]
    assert record["id"] != old.id and record["deleted_at"] is None
    assert [(r.id, r.deleted_at is None) for r in await assignment_rows(runtime, "ROOM01")] == [
        (old.id, False),
        (record["id"], True),
    ]
    controller = await controller_row(runtime, "ROOM01")
    assert (controller.user_id, controller.room_id) == (ana_id, None)


async def test_a_released_claim_code_controller_still_needs_its_code(runtime, client):
    _, ana = await ana_owns_one(runtime, client, claim_code="SECRET")
    bob_id, bob = await logged_in_user(runtime, client, BOB)
    assert (await client.delete(assign_url("ROOM01"), headers=ana)).status_code == 200
    for body in (None, {"claim_code": "wrong"}):
        kwargs = {} if body is None else {"json": body}
        assert_problem(await client.post(assign_url("ROOM01"), headers=bob, **kwargs), 403)
    # the code is required of the previous owner too: releasing gives up the claim
    assert_problem(await client.post(assign_url("ROOM01"), headers=ana), 403)
    assert (await controller_row(runtime, "ROOM01")).user_id is None
    assert await active_rows(runtime, "ROOM01") == []
    response = await client.post(assign_url("ROOM01"), headers=bob, json={"claim_code": "SECRET"})
    assert response.status_code == 200, response.text
    assert response.json()["controller_reassign"]["user_id"] == bob_id
    assert [r.user_id for r in await active_rows(runtime, "ROOM01")] == [bob_id]
    assert (await controller_row(runtime, "ROOM01")).user_id == bob_id


async def test_release_by_someone_who_is_not_the_owner_is_404_and_changes_nothing(runtime, client):
    _, ana = await logged_in_user(runtime, client, ANA)
    await logged_in_user(runtime, client, BOB)
    await make_controller(runtime, "BOB001", owner=BOB, room_id=3)
    await make_controller(runtime, "FREE01")
    before = await snapshot(runtime)
    others = await client.delete(assign_url("BOB001"), headers=ana)
    unowned = await client.delete(assign_url("FREE01"), headers=ana)
    unknown = await client.delete(assign_url("NOPE01"), headers=ana)
    for response in (others, unowned, unknown):
        assert_problem(response, 404)
    # the same answer as for a controller that does not exist, and as for a read
    assert others.text == unknown.text.replace("NOPE01", "BOB001")
    assert unowned.text == unknown.text.replace("NOPE01", "FREE01")
    read = await client.get("/v1/controllers/BOB001", headers=ana)
    assert others.text == read.text
    assert await snapshot(runtime) == before


async def test_a_previous_owner_cannot_release_it(runtime, client):
    _, ana = await ana_owns_one(runtime, client)
    bob_id, _ = await logged_in_user(runtime, client, BOB)
    response = await client.patch(
        "/v1/controllers/ROOM01/reassign", headers=ana, json={"owner": BOB}
    )
    assert response.status_code == 200, response.text
    before = await snapshot(runtime)
    assert_problem(await client.delete(assign_url("ROOM01"), headers=ana), 404)
    assert await snapshot(runtime) == before
    assert (await controller_row(runtime, "ROOM01")).user_id == bob_id


async def test_releasing_twice_is_404_the_second_time(runtime, client):
    _, ana = await ana_owns_one(runtime, client)
    first = await client.delete(assign_url("ROOM01"), headers=ana)
    assert first.status_code == 200, first.text
    before = await snapshot(runtime)
    second = await client.delete(assign_url("ROOM01"), headers=ana)
    assert_problem(second, 404)
    assert await snapshot(runtime) == before
    [record] = await assignment_rows(runtime, "ROOM01")
    assert record.deleted_at is not None
    assert format_timestamp(record.deleted_at) == first.json()["controller_reassign"]["deleted_at"]


@pytest.mark.parametrize(
    "serial",
    ["NOPE01", "room01", "ROOM01%20", "..%2FROOM01", "%2E%2E", "A" * 65, "%00", "ROOM%0001",
     "ROOM01%0A", "nope-%C3%A9", "ROOM01%3B"],
)  # fmt: skip
async def test_release_of_an_unknown_or_malformed_serial_is_404(runtime, client, serial):
    _, ana = await ana_owns_one(runtime, client)
    before = await snapshot(runtime)
    assert_problem(await client.delete(assign_url(serial), headers=ana), 404)
    assert await snapshot(runtime) == before


async def test_release_on_a_dot_dot_path_is_404_not_5xx(runtime, client):
    """httpx resolves the dot segment itself; the encoded forms above reach the handler."""
    _, ana = await ana_owns_one(runtime, client)
    before = await snapshot(runtime)
    assert_problem(await client.delete(assign_url("../x"), headers=ana), 404)
    assert await snapshot(runtime) == before


@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer " + "0" * 40}, {"Authorization": "Basic YTpi"}],
    ids=["no-token", "unknown-token", "other-scheme"],
)
async def test_release_without_a_valid_token_is_401_and_releases_nothing(runtime, client, headers):
    await ana_owns_one(runtime, client)
    before = await snapshot(runtime)
    response = await client.delete(assign_url("ROOM01"), headers=headers)
    assert_problem(response, 401)
    assert response.headers["www-authenticate"].startswith('Bearer realm="devicecontrol"')
    assert await snapshot(runtime) == before


async def test_release_without_the_v1_prefix_works_the_same(runtime, client):
    ana_id, ana = await ana_owns_one(runtime, client)
    response = await client.delete(assign_url("ROOM01", prefix=""), headers=ana)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/hal+json")
    body = response.json()
    assert body["_links"] == {"self": {"href": "/v1/controllers/ROOM01/assign"}}
    assert body["controller_reassign"]["user_id"] == ana_id
    assert body["controller_reassign"]["deleted_at"] is not None
    controller = await controller_row(runtime, "ROOM01")
    assert (controller.user_id, controller.room_id) == (None, None)
    assert_problem(await client.delete(assign_url("ROOM01", prefix=""), headers=ana), 404)


async def test_release_of_a_controller_taken_over_by_reassign_closes_the_new_owners_record(
    runtime, client
):
    ana_id, ana = await ana_owns_one(runtime, client)
    bob_id, bob = await logged_in_user(runtime, client, BOB)
    moved = await client.patch("/v1/controllers/ROOM01/reassign", headers=ana, json={"owner": BOB})
    bob_record = moved.json()["controller_reassign"]
    response = await client.delete(assign_url("ROOM01"), headers=bob)
    assert response.status_code == 200, response.text
    record = response.json()["controller_reassign"]
    assert (record["id"], record["user_id"]) == (bob_record["id"], bob_id)
    assert record["deleted_at"] is not None
    assert [
        (r.user_id, r.deleted_at is None) for r in await assignment_rows(runtime, "ROOM01")
    ] == [
        (ana_id, False),
        (bob_id, False),
    ]
    assert (await controller_row(runtime, "ROOM01")).user_id is None
