"""Releases racing assigns, reassigns and other releases: one consistent outcome, never a 5xx.

Requests go through ``concurrent_client`` (see helpers) so that they truly overlap.
"""

from __future__ import annotations

import asyncio

from devicecontrol.runtime import Runtime
from tests.controllers.helpers import (
    active_rows,
    assignment_rows,
    concurrent_client,
    controller_row,
)
from tests.factories import logged_in_user, make_controller

SERIAL = "RACE01"
ASSIGN = f"/v1/controllers/{SERIAL}/assign"
REASSIGN = f"/v1/controllers/{SERIAL}/reassign"
ROUNDS = 8
ANA = "ana@example.com"
BOB = "bob@example.com"
CEM = "cem@example.com"


async def consistent_owner(runtime: Runtime) -> int | None:
    """At most one active record, and the controller's owner is exactly its user."""
    controller = await controller_row(runtime, SERIAL)
    active = await active_rows(runtime, SERIAL)
    if controller.user_id is None:
        assert active == []
    else:
        assert [r.user_id for r in active] == [controller.user_id]
    return controller.user_id


def texts(responses) -> list[str]:
    return [f"{r.request.method} {r.status_code} {r.text}" for r in responses]


async def test_owner_releasing_while_the_other_user_assigns_stays_consistent(
    runtime, client, settings
):
    ana_id, ana = await logged_in_user(runtime, client, ANA)
    bob_id, bob = await logged_in_user(runtime, client, BOB)
    await make_controller(runtime, SERIAL, owner=ANA, room_id=5)
    users = {ana_id: ana, bob_id: bob}
    winners = set()
    async with concurrent_client(settings) as http:
        for _ in range(ROUNDS):
            owner = await consistent_owner(runtime)
            if owner is None:  # nobody claimed it last round: Ana takes it back first
                assert (await http.post(ASSIGN, headers=ana)).status_code == 200
                owner = ana_id
            other = bob_id if owner == ana_id else ana_id
            [held] = await active_rows(runtime, SERIAL)
            requesters = (other, other, owner, other, other, owner)
            responses = await asyncio.gather(
                http.delete(ASSIGN, headers=users[owner]),
                *(http.post(ASSIGN, headers=users[u]) for u in requesters),
            )
            assert all(r.status_code < 500 for r in responses), texts(responses)
            release, assigns = responses[0], responses[1:]
            # the owner's release always wins: nobody else can take an owned controller
            assert release.status_code == 200, release.text
            closed = release.json()["controller_reassign"]
            assert (closed["id"], closed["user_id"]) == (held.id, owner)
            assert closed["deleted_at"] is not None
            claimed_ids = set()
            for user, response in zip(requesters, assigns, strict=True):
                assert response.status_code in {200, 409}, response.text
                if response.status_code == 200:
                    record = response.json()["controller_reassign"]
                    assert record["user_id"] == user
                    if record["id"] != held.id:  # claimed after the release
                        claimed_ids.add(record["id"])
            assert len(claimed_ids) <= 1, claimed_ids  # one claim after the release at most
            now_owner = await consistent_owner(runtime)
            active = await active_rows(runtime, SERIAL)
            assert [r.id for r in active] == sorted(claimed_ids)
            if now_owner is not None:
                winners.add(now_owner)
            records = await assignment_rows(runtime, SERIAL)
            assert held.id in {r.id for r in records if r.deleted_at is not None}
    assert winners <= {ana_id, bob_id}


async def test_one_release_against_twenty_concurrent_assigns_leaves_one_owner_at_most(
    runtime, client, settings
):
    _, ana = await logged_in_user(runtime, client, ANA)
    bob_id, bob = await logged_in_user(runtime, client, BOB)
    cem_id, cem = await logged_in_user(runtime, client, CEM)
    await make_controller(runtime, SERIAL, owner=ANA)
    [held] = await assignment_rows(runtime, SERIAL)
    async with concurrent_client(settings) as http:
        assigns = [http.post(ASSIGN, headers=bob if i % 2 else cem) for i in range(20)]
        release, *responses = await asyncio.gather(http.delete(ASSIGN, headers=ana), *assigns)
    assert all(r.status_code < 500 for r in [release, *responses]), texts([release, *responses])
    assert release.status_code == 200, release.text
    assert release.json()["controller_reassign"]["id"] == held.id
    assert {r.status_code for r in responses} <= {200, 409}, texts(responses)
    records = [r.json()["controller_reassign"] for r in responses if r.status_code == 200]
    owner = await consistent_owner(runtime)
    if records:
        assert {r["user_id"] for r in records} == {owner}
        assert owner in {bob_id, cem_id}
        assert {r["id"] for r in records} == {(await active_rows(runtime, SERIAL))[0].id}
    else:
        assert owner is None
    stored = await assignment_rows(runtime, SERIAL)
    assert stored[0].id == held.id and stored[0].deleted_at is not None
    assert len(stored) == 1 + bool(records)


async def test_owner_releasing_and_reassigning_at_once_gives_one_outcome(runtime, client, settings):
    ana_id, ana = await logged_in_user(runtime, client, ANA)
    bob_id, bob = await logged_in_user(runtime, client, BOB)
    await make_controller(runtime, SERIAL, owner=ANA)
    users = {ana_id: (ana, ANA), bob_id: (bob, BOB)}
    outcomes = set()
    async with concurrent_client(settings) as http:
        for _ in range(ROUNDS):
            owner = await consistent_owner(runtime)
            if owner is None:
                assert (await http.post(ASSIGN, headers=ana)).status_code == 200
                owner = ana_id
            other = bob_id if owner == ana_id else ana_id
            [held] = await active_rows(runtime, SERIAL)
            count_before = len(await assignment_rows(runtime, SERIAL))
            release, reassign = await asyncio.gather(
                http.delete(ASSIGN, headers=users[owner][0]),
                http.patch(REASSIGN, headers=users[owner][0], json={"owner": users[other][1]}),
            )
            statuses = (release.status_code, reassign.status_code)
            assert all(s < 500 for s in statuses), texts([release, reassign])
            # exactly one of them happened; the loser finds it no longer the caller's
            assert sorted(statuses) in ([200, 404], [200, 409]), texts([release, reassign])
            now_owner = await consistent_owner(runtime)
            records = await assignment_rows(runtime, SERIAL)
            closed = next(r for r in records if r.id == held.id)
            assert closed.deleted_at is not None
            if release.status_code == 200:
                outcomes.add("released")
                assert release.json()["controller_reassign"]["id"] == held.id
                assert now_owner is None
                assert len(records) == count_before
            else:
                outcomes.add("reassigned")
                record = reassign.json()["controller_reassign"]
                assert (record["user_id"], record["deleted_at"]) == (other, None)
                assert now_owner == other
                assert [r.id for r in await active_rows(runtime, SERIAL)] == [record["id"]]
                assert len(records) == count_before + 1
    assert outcomes  # at least one round ran; which side wins is up to the scheduler


async def test_two_concurrent_releases_give_one_200_and_one_404(runtime, client, settings):
    ana_id, ana = await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, SERIAL, owner=ANA, room_id=5)
    async with concurrent_client(settings) as http:
        for round_number in range(ROUNDS):
            if round_number:
                assert (await http.post(ASSIGN, headers=ana)).status_code == 200
            [held] = await active_rows(runtime, SERIAL)
            responses = await asyncio.gather(
                http.delete(ASSIGN, headers=ana), http.delete(ASSIGN, headers=ana)
            )
            assert sorted(r.status_code for r in responses) == [200, 404], texts(responses)
            [won] = [r for r in responses if r.status_code == 200]
            [lost] = [r for r in responses if r.status_code == 404]
            assert lost.headers["content-type"].startswith("application/problem+json")
            record = won.json()["controller_reassign"]
            assert (record["id"], record["user_id"]) == (held.id, ana_id)
            records = await assignment_rows(runtime, SERIAL)
            # one record per round, each closed exactly once, none active
            assert len(records) == round_number + 1
            assert all(r.deleted_at is not None for r in records)
            assert await consistent_owner(runtime) is None
            assert (await controller_row(runtime, SERIAL)).room_id is None


async def test_many_concurrent_releases_give_exactly_one_200(runtime, client, settings):
    _, ana = await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, SERIAL, owner=ANA)
    [held] = await assignment_rows(runtime, SERIAL)
    async with concurrent_client(settings) as http:
        responses = await asyncio.gather(*(http.delete(ASSIGN, headers=ana) for _ in range(10)))
    statuses = sorted(r.status_code for r in responses)
    assert statuses == [200] + [404] * 9, texts(responses)
    [closed] = await assignment_rows(runtime, SERIAL)
    assert closed.id == held.id and closed.deleted_at is not None
    assert await consistent_owner(runtime) is None
