"""GET /controllers/{serial_number}/assignments: the owner's view of the ownership history.

Every assignment record of the controller (previous owners' too), newest first, HAL-paged
like the controller list.
"""

from __future__ import annotations

import httpx
import pytest

from devicecontrol.clock import format_timestamp
from devicecontrol.config import Settings
from tests.apps import lent_client
from tests.controllers.helpers import (
    BAD_PAGING,
    RECORD_FIELDS,
    TIMESTAMP,
    assert_problem,
    assignment_rows,
    controller_row,
)
from tests.factories import logged_in_user, make_controller

ANA = "ana@example.com"
BOB = "bob@example.com"
CEM = "cem@example.com"
SERIAL = "HIST01"
HISTORY = f"/v1/controllers/{SERIAL}/assignments"
ASSIGN = f"/v1/controllers/{SERIAL}/assign"
REASSIGN = f"/v1/controllers/{SERIAL}/reassign"


def ok(response: httpx.Response) -> dict:
    assert response.status_code == 200, response.text
    return response.json()


async def four_owners_later(runtime, client) -> dict:
    """Ana assigns, hands it to Bob, Bob releases, Cem assigns and releases, Ana assigns again.

    Returns the users (id, headers) and the four records' ids, oldest first.
    """
    ana_id, ana = await logged_in_user(runtime, client, ANA)
    bob_id, bob = await logged_in_user(runtime, client, BOB)
    cem_id, cem = await logged_in_user(runtime, client, CEM)
    await make_controller(
        runtime, SERIAL, mac="0011223344AA", type="melissa", name="Hall",
        firmware_version="2.0", device_group="indoor", room_id=9,
    )  # fmt: skip
    ids = [(ok(await client.post(ASSIGN, headers=ana)))["controller_reassign"]["id"]]
    moved = ok(await client.patch(REASSIGN, headers=ana, json={"owner": BOB}))
    ids.append(moved["controller_reassign"]["id"])
    ok(await client.delete(ASSIGN, headers=bob))
    ids.append((ok(await client.post(ASSIGN, headers=cem)))["controller_reassign"]["id"])
    ok(await client.delete(ASSIGN, headers=cem))
    ids.append((ok(await client.post(ASSIGN, headers=ana)))["controller_reassign"]["id"])
    return {
        "ana": (ana_id, ana), "bob": (bob_id, bob), "cem": (cem_id, cem), "ids": ids,
    }  # fmt: skip


def history_href(page: int, page_size: int | None = None) -> str:
    href = f"{HISTORY}?page={page}"
    return href if page_size is None else f"{href}&page_size={page_size}"


async def test_the_owner_sees_every_record_newest_first(runtime, client):
    world = await four_owners_later(runtime, client)
    (ana_id, ana), (bob_id, _), (cem_id, _) = world["ana"], world["bob"], world["cem"]
    response = await client.get(HISTORY, headers=ana)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/hal+json")
    body = response.json()
    assert set(body) == {"_embedded", "total", "page", "page_size", "page_count", "_links"}
    assert set(body["_embedded"]) == {"controller_reassign"}
    items = body["_embedded"]["controller_reassign"]
    assert (body["total"], body["page"], body["page_size"], body["page_count"]) == (4, 1, 100, 1)
    assert [r["id"] for r in items] == world["ids"][::-1]
    assert [r["user_id"] for r in items] == [ana_id, cem_id, bob_id, ana_id]
    assert [r["deleted_at"] is None for r in items] == [True, False, False, False]
    stored = {r.id: r for r in await assignment_rows(runtime, SERIAL)}
    for item in items:
        assert set(item) == RECORD_FIELDS
        row = stored[item["id"]]
        assert item == {
            "id": row.id, "user_id": row.user_id, "serial_number": SERIAL,
            "mac": "0011223344AA", "firmware_version": "2.0", "name": "Hall",
            "type": "melissa", "device_group": "indoor", "status_push": 0,
            "room_id": row.room_id,
            "created": format_timestamp(row.created_at),
            "assigned_at": format_timestamp(row.assigned_at),
            "deleted_at": format_timestamp(row.deleted_at),
        }  # fmt: skip
        for stamp in (item["created"], item["assigned_at"], item["deleted_at"]):
            assert stamp is None or TIMESTAMP.match(stamp), stamp
    # the first record kept the room it was claimed into; later ones start roomless
    assert [r["room_id"] for r in items] == [None, None, None, 9]
    assert body["_links"] == {
        "self": {"href": history_href(1)},
        "first": {"href": history_href(1)},
        "last": {"href": history_href(1)},
    }
    assert (await controller_row(runtime, SERIAL)).user_id == ana_id


async def test_history_shows_only_this_controllers_records(runtime, client):
    world = await four_owners_later(runtime, client)
    _, ana = world["ana"]
    await make_controller(runtime, "OTHER1", owner=ANA)
    await make_controller(runtime, "OTHER2", owner=BOB)
    body = ok(await client.get(HISTORY, headers=ana))
    assert [r["id"] for r in body["_embedded"]["controller_reassign"]] == world["ids"][::-1]
    assert {r["serial_number"] for r in body["_embedded"]["controller_reassign"]} == {SERIAL}
    other = ok(await client.get("/v1/controllers/OTHER1/assignments", headers=ana))
    [only] = other["_embedded"]["controller_reassign"]
    assert [only["id"]] == [r.id for r in await assignment_rows(runtime, "OTHER1")]
    assert other["total"] == 1 and only["deleted_at"] is None


async def test_history_of_a_controller_provisioned_to_me_has_its_one_record(runtime, client):
    ana_id, ana = await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, SERIAL, owner=ANA, room_id=4)
    [stored] = await assignment_rows(runtime, SERIAL)
    body = ok(await client.get(HISTORY, headers=ana))
    assert (body["total"], body["page_count"]) == (1, 1)
    [item] = body["_embedded"]["controller_reassign"]
    assert (item["id"], item["user_id"], item["room_id"], item["deleted_at"]) == (
        stored.id, ana_id, 4, None,
    )  # fmt: skip


async def test_each_owner_in_turn_sees_the_history_up_to_then(runtime, client):
    ana_id, ana = await logged_in_user(runtime, client, ANA)
    bob_id, bob = await logged_in_user(runtime, client, BOB)
    await make_controller(runtime, SERIAL)
    ok(await client.post(ASSIGN, headers=ana))
    mine = ok(await client.get(HISTORY, headers=ana))
    assert [r["user_id"] for r in mine["_embedded"]["controller_reassign"]] == [ana_id]
    ok(await client.patch(REASSIGN, headers=ana, json={"owner": BOB}))
    bobs = ok(await client.get(HISTORY, headers=bob))
    items = bobs["_embedded"]["controller_reassign"]
    assert [(r["user_id"], r["deleted_at"] is None) for r in items] == [
        (bob_id, True), (ana_id, False),
    ]  # fmt: skip
    assert bobs["total"] == 2


async def test_paging_with_page_size_1_walks_through_every_record(runtime, client):
    world = await four_owners_later(runtime, client)
    _, ana = world["ana"]
    seen, href, pages = [], history_href(1, 1), []
    while href is not None:
        body = ok(await client.get(href, headers=ana))
        assert (body["total"], body["page_size"], body["page_count"]) == (4, 1, 4)
        assert len(body["_embedded"]["controller_reassign"]) == 1
        seen.append(body["_embedded"]["controller_reassign"][0]["id"])
        pages.append(body["page"])
        href = body["_links"].get("next", {}).get("href")
    assert pages == [1, 2, 3, 4]
    assert seen == world["ids"][::-1]


async def test_page_links_are_exact(runtime, client):
    world = await four_owners_later(runtime, client)
    _, ana = world["ana"]

    async def links(page: int) -> dict[str, str]:
        body = ok(await client.get(history_href(page, 1), headers=ana))
        return {name: value["href"] for name, value in body["_links"].items()}

    def at(page: int) -> str:
        return f"/v1/controllers/{SERIAL}/assignments?page={page}&page_size=1"

    assert await links(1) == {"self": at(1), "first": at(1), "last": at(4), "next": at(2)}
    assert await links(2) == {
        "self": at(2), "first": at(1), "last": at(4), "prev": at(1), "next": at(3),
    }  # fmt: skip
    assert await links(3) == {
        "self": at(3), "first": at(1), "last": at(4), "prev": at(2), "next": at(4),
    }  # fmt: skip
    assert await links(4) == {"self": at(4), "first": at(1), "last": at(4), "prev": at(3)}
    # a page size of 3: two pages, the second holding the oldest record
    body = ok(await client.get(history_href(2, 3), headers=ana))
    assert [r["id"] for r in body["_embedded"]["controller_reassign"]] == [world["ids"][0]]
    assert body["page_count"] == 2
    assert body["_links"] == {
        "self": {"href": history_href(2, 3)},
        "first": {"href": history_href(1, 3)},
        "last": {"href": history_href(2, 3)},
        "prev": {"href": history_href(1, 3)},
    }


async def test_links_leave_out_the_default_page_size_even_when_it_is_given(runtime, client):
    world = await four_owners_later(runtime, client)
    _, ana = world["ana"]
    body = ok(await client.get(history_href(1, 100), headers=ana))
    assert body["page_size"] == 100
    assert {v["href"] for v in body["_links"].values()} == {history_href(1)}


async def test_a_page_past_the_last_is_200_and_empty(runtime, client):
    world = await four_owners_later(runtime, client)
    _, ana = world["ana"]
    for href, page, size, count in [
        (history_href(5, 1), 5, 1, 4),
        (history_href(2), 2, 100, 1),
        (history_href(10**12, 500), 10**12, 500, 1),
    ]:
        body = ok(await client.get(href, headers=ana))
        assert body["_embedded"] == {"controller_reassign": []}, href
        assert (body["total"], body["page"], body["page_size"], body["page_count"]) == (
            4, page, size, count,
        ), href  # fmt: skip
        assert body["_links"]["self"]["href"] == href
        assert body["_links"]["first"]["href"] == history_href(1, None if size == 100 else size)
        assert body["_links"]["last"]["href"] == history_href(count, None if size == 100 else size)
        assert "next" not in body["_links"], href


@pytest.mark.parametrize(("query", "field"), BAD_PAGING)
async def test_bad_page_or_page_size_is_400_naming_it(runtime, client, query, field):
    _, ana = await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, SERIAL, owner=ANA)
    assert_problem(await client.get(f"{HISTORY}?{query}", headers=ana), 400, field)


async def test_page_size_bounds_follow_the_configured_default_and_maximum(runtime, database_url):
    settings = Settings(database_url=database_url, default_page_size=2, max_page_size=3)
    async with lent_client(settings) as client:
        world = await four_owners_later(runtime, client)
        _, ana = world["ana"]
        body = ok(await client.get(HISTORY, headers=ana))
        assert (body["page_size"], body["page_count"], body["total"]) == (2, 2, 4)
        assert [r["id"] for r in body["_embedded"]["controller_reassign"]] == world["ids"][:1:-1]
        assert body["_links"]["next"]["href"] == history_href(2)
        three = ok(await client.get(history_href(1, 3), headers=ana))
        assert len(three["_embedded"]["controller_reassign"]) == 3
        assert three["_links"]["next"]["href"] == history_href(2, 3)
        assert_problem(await client.get(history_href(1, 4), headers=ana), 400, "page_size")


async def test_a_previous_owner_gets_404(runtime, client):
    world = await four_owners_later(runtime, client)
    (_, bob), (_, cem) = world["bob"], world["cem"]
    unknown = await client.get("/v1/controllers/NOPE01/assignments", headers=bob)
    assert_problem(unknown, 404)
    for previous in (bob, cem):
        response = await client.get(HISTORY, headers=previous)
        assert_problem(response, 404)
        assert response.text == unknown.text.replace("NOPE01", SERIAL)


async def test_someone_who_never_owned_it_and_an_unowned_controller_get_404(runtime, client):
    _, ana = await logged_in_user(runtime, client, ANA)
    _, dan = await logged_in_user(runtime, client, "dan@example.com")
    await make_controller(runtime, SERIAL, owner=ANA)
    await make_controller(runtime, "FREE01")
    assert_problem(await client.get(HISTORY, headers=dan), 404)
    assert_problem(await client.get("/v1/controllers/FREE01/assignments", headers=ana), 404)
    # a released controller's history is nobody's, not even the releaser's
    ok(await client.delete(ASSIGN, headers=ana))
    assert_problem(await client.get(HISTORY, headers=ana), 404)
    assert (await controller_row(runtime, SERIAL)).user_id is None


@pytest.mark.parametrize(
    "serial", ["NOPE01", "hist01", "A" * 65, "%00", "..%2FHIST01", "HIST01%0A", "nope-%C3%A9"]
)
async def test_unknown_or_malformed_serial_is_404(runtime, client, serial):
    _, ana = await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, SERIAL, owner=ANA)
    assert_problem(await client.get(f"/v1/controllers/{serial}/assignments", headers=ana), 404)


@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer " + "0" * 40}],
    ids=["no-token", "unknown-token"],
)
async def test_without_a_valid_token_is_401(runtime, client, headers):
    await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, SERIAL, owner=ANA)
    response = await client.get(HISTORY, headers=headers)
    assert_problem(response, 401)
    assert response.headers["www-authenticate"].startswith('Bearer realm="devicecontrol"')


async def test_the_unprefixed_path_gives_the_same_body(runtime, client):
    world = await four_owners_later(runtime, client)
    _, ana = world["ana"]
    for query in ("", "?page=2&page_size=1"):
        prefixed = await client.get(HISTORY + query, headers=ana)
        plain = await client.get(f"/controllers/{SERIAL}/assignments{query}", headers=ana)
        assert plain.status_code == 200, plain.text
        assert plain.headers["content-type"].startswith("application/hal+json")
        assert plain.json() == prefixed.json()
    assert_problem(await client.get(f"/controllers/{SERIAL}/assignments?page=0", headers=ana), 400)
