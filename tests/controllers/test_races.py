"""Racing ownership changes: the database, not luck, decides; one active record always.

Requests go through ``concurrent_client`` (see helpers) so that they truly overlap.
"""

from __future__ import annotations

import asyncio
from datetime import datetime

import pytest
from sqlalchemy import insert
from sqlalchemy.exc import IntegrityError

from devicecontrol.database.tables import controller_assignments
from devicecontrol.runtime import Runtime
from tests.controllers.helpers import active_rows, concurrent_client, controller_row
from tests.factories import logged_in_user, make_controller

SERIAL = "RACE01"
ASSIGN = f"/v1/controllers/{SERIAL}/assign"
REASSIGN = f"/v1/controllers/{SERIAL}/reassign"
ROUNDS = 12  # each round hands the controller over while both users try to assign it


async def assert_one_owner_shown_by_one_record(runtime: Runtime) -> int | None:
    """The controller's owner is exactly the user of its only active record."""
    owner = (await controller_row(runtime, SERIAL)).user_id
    active = await active_rows(runtime, SERIAL)
    if owner is None:
        assert active == []
    else:
        assert [r.user_id for r in active] == [owner]
    return owner


async def test_twenty_concurrent_assigns_from_two_users_give_one_owner_and_one_record(
    runtime, client, settings
):
    ana_id, ana = await logged_in_user(runtime, client, "ana@example.com")
    bob_id, bob = await logged_in_user(runtime, client, "bob@example.com")
    await make_controller(runtime, SERIAL)
    async with concurrent_client(settings) as http:
        responses = await asyncio.gather(
            *(http.post(ASSIGN, headers=ana if i % 2 else bob) for i in range(20))
        )
    statuses = [r.status_code for r in responses]
    assert set(statuses) <= {200, 409}, [r.text for r in responses]
    winner = await assert_one_owner_shown_by_one_record(runtime)
    assert winner in {ana_id, bob_id}
    records = [r.json()["controller_reassign"] for r in responses if r.status_code == 200]
    assert records and {r["user_id"] for r in records} == {winner}
    assert len({r["id"] for r in records}) == 1
    assert records[0]["id"] == (await active_rows(runtime, SERIAL))[0].id


async def test_concurrent_assigns_by_one_user_all_answer_200_with_one_record(
    runtime, client, settings
):
    ana_id, ana = await logged_in_user(runtime, client)
    await make_controller(runtime, SERIAL)
    async with concurrent_client(settings) as http:
        responses = await asyncio.gather(*(http.post(ASSIGN, headers=ana) for _ in range(10)))
    assert [r.status_code for r in responses] == [200] * 10, [r.text for r in responses]
    assert len({r.json()["controller_reassign"]["id"] for r in responses}) == 1
    assert await assert_one_owner_shown_by_one_record(runtime) == ana_id


async def test_reassign_racing_assigns_never_leaves_two_active_records(runtime, client, settings):
    ana_id, ana = await logged_in_user(runtime, client, "ana@example.com")
    bob_id, bob = await logged_in_user(runtime, client, "bob@example.com")
    await make_controller(runtime, SERIAL, owner="ana@example.com")
    users = {ana_id: (ana, "ana@example.com"), bob_id: (bob, "bob@example.com")}
    async with concurrent_client(settings) as http:
        for _ in range(ROUNDS):
            owner = await assert_one_owner_shown_by_one_record(runtime)
            other = bob_id if owner == ana_id else ana_id
            reassign = http.patch(
                REASSIGN, headers=users[owner][0], json={"owner": users[other][1]}
            )
            requesters = (owner, other) * 4
            assigns = [http.post(ASSIGN, headers=users[u][0]) for u in requesters]
            responses = await asyncio.gather(reassign, *assigns)
            assert responses[0].status_code == 200, responses[0].text
            for user, response in zip(requesters, responses[1:], strict=True):
                assert response.status_code in {200, 409}, response.text
                if response.status_code == 200:  # a 200 to assign means "it is yours"
                    assert response.json()["controller_reassign"]["user_id"] == user
            assert await assert_one_owner_shown_by_one_record(runtime) == other


async def test_two_concurrent_reassigns_to_different_users_leave_one_owner(
    runtime, client, settings
):
    _, ana = await logged_in_user(runtime, client, "ana@example.com")
    bob_id, _ = await logged_in_user(runtime, client, "bob@example.com")
    cem_id, _ = await logged_in_user(runtime, client, "cem@example.com")
    await make_controller(runtime, SERIAL, owner="ana@example.com")
    async with concurrent_client(settings) as http:
        responses = await asyncio.gather(
            *(
                http.patch(REASSIGN, headers=ana, json={"owner": owner})
                for owner in ["bob@example.com", "cem@example.com"] * 3
            )
        )
    statuses = sorted(r.status_code for r in responses)
    assert statuses[0] == 200 and set(statuses) <= {200, 404, 409}, [r.text for r in responses]
    winner = await assert_one_owner_shown_by_one_record(runtime)
    assert winner in {bob_id, cem_id}
    assert {
        r.json()["controller_reassign"]["user_id"] for r in responses if r.status_code == 200
    } == {winner}


async def test_database_rejects_a_second_active_record_for_one_controller(runtime, client):
    ana_id, _ = await logged_in_user(runtime, client, "ana@example.com")
    await make_controller(runtime, SERIAL, owner="ana@example.com")
    current = (await active_rows(runtime, SERIAL))[0]
    copy = {
        k: v
        for k, v in current._mapping.items()
        if k not in {"id", "deleted_at"} and not k.startswith("_")
    }
    with pytest.raises(IntegrityError):
        async with runtime.database.write() as connection:
            await connection.execute(insert(controller_assignments).values(**copy))
    # the index is partial: closed records of the same controller are allowed
    async with runtime.database.write() as connection:
        await connection.execute(
            insert(controller_assignments).values(**copy, deleted_at=datetime(2026, 1, 1))
        )
    assert [r.user_id for r in await active_rows(runtime, SERIAL)] == [ana_id]
