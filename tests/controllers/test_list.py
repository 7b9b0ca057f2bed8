"""GET /controllers: the caller's own controllers, filtered, paged, with HAL links."""

from __future__ import annotations

import dataclasses
from urllib.parse import parse_qs, urlsplit

import pytest

from devicecontrol.config import Settings
from tests.apps import lent_client
from tests.controllers.helpers import (
    BAD_PAGING,
    CONTROLLER_FIELDS,
    assert_problem,
    counted_statements,
    stamp,
)
from tests.devices.helpers import report
from tests.factories import logged_in_user, make_controller

ANA = "ana@example.com"


def serials(response) -> list[str]:
    assert response.status_code == 200, response.text
    return [c["serial_number"] for c in response.json()["_embedded"]["controller"]]


def link(href: str) -> dict[str, list[str]]:
    """The query of a path-only /v1/controllers link."""
    parts = urlsplit(href)
    assert not parts.scheme and not parts.netloc and parts.path == "/v1/controllers", href
    return parse_qs(parts.query)


async def make_owned(runtime, count: int, owner: str = ANA, prefix: str = "C") -> list[str]:
    made = [f"{prefix}{i:03d}" for i in range(count)]
    for serial in made:
        await make_controller(runtime, serial, owner=owner)
    return made


async def test_list_shows_only_the_callers_controllers_oldest_first(runtime, client):
    _, ana = await logged_in_user(runtime, client, ANA)
    await logged_in_user(runtime, client, "bob@example.com")
    for serial, owner in [("Z9", ANA), ("BOB1", "bob@example.com"), ("A1", ANA), ("FREE", None)]:
        await make_controller(runtime, serial, owner=owner)
    await make_controller(runtime, "M5", owner=ANA)
    response = await client.get("/v1/controllers", headers=ana)
    assert serials(response) == ["Z9", "A1", "M5"]
    assert response.json()["total"] == 3
    assert response.headers["content-type"].startswith("application/hal+json")


async def test_list_item_has_exactly_the_contract_fields(runtime, client):
    user_id, ana = await logged_in_user(runtime, client, ANA)
    await make_controller(
        runtime, "PLUG-1", owner=ANA, mac="AABBCCDDEEFF", type="melissa", name="Hall",
        firmware_version="1.2.3", brand_id=4, room_id=7, online=True,
    )  # fmt: skip
    [item] = (await client.get("/v1/controllers", headers=ana)).json()["_embedded"]["controller"]
    assert set(item) == CONTROLLER_FIELDS
    assert item == {
        "user_id": user_id, "serial_number": "PLUG-1", "mac": "AABBCCDDEEFF",
        "firmware_version": "1.2.3", "name": "Hall", "type": "melissa", "room_id": 7,
        "online": True, "brand_id": 4, "controller_log": [],
        "_links": {"self": {"href": "/v1/controllers/PLUG-1"}},
    }  # fmt: skip


async def test_list_with_no_controllers_is_empty_with_one_page(runtime, client):
    _, ana = await logged_in_user(runtime, client, ANA)
    body = (await client.get("/v1/controllers", headers=ana)).json()
    assert body["_embedded"] == {"controller": []}
    assert (body["total"], body["page"], body["page_size"], body["page_count"]) == (0, 1, 100, 1)
    assert set(body["_links"]) == {"self", "first", "last"}
    assert all(link(v["href"]) == {"page": ["1"]} for v in body["_links"].values())


async def test_list_type_filter_is_an_exact_match(runtime, client):
    _, ana = await logged_in_user(runtime, client, ANA)
    for serial, kind in [("P1", "smart_plug"), ("M1", "melissa"), ("P2", "smart_plug")]:
        await make_controller(runtime, serial, owner=ANA, type=kind)
    get = client.get
    assert serials(await get("/v1/controllers?type=smart_plug", headers=ana)) == ["P1", "P2"]
    assert serials(await get("/v1/controllers?type=melissa", headers=ana)) == ["M1"]
    for near_miss in ["smart", "Smart_Plug", "smart_plug%20", "%25"]:
        assert serials(await get(f"/v1/controllers?type={near_miss}", headers=ana)) == []


@pytest.mark.parametrize(
    "query", ["aa:bb:cc:dd:ee:ff", "AA-BB-CC-DD-EE-FF", "aabb.ccdd.eeff", "AaBbCcDdEeFf"]
)
async def test_list_mac_filter_ignores_separators_and_case(runtime, client, query):
    _, ana = await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, "HIT", owner=ANA, mac="AABBCCDDEEFF")
    await make_controller(runtime, "MISS", owner=ANA, mac="AABBCCDDEE00")
    response = await client.get("/v1/controllers", params={"mac": query}, headers=ana)
    assert serials(response) == ["HIT"]
    assert response.json()["total"] == 1


async def test_list_mac_filter_matches_the_whole_address_only(runtime, client):
    _, ana = await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, "HIT", owner=ANA, mac="AABBCCDDEEFF")
    assert serials(await client.get("/v1/controllers?mac=AABB", headers=ana)) == []


FULLWIDTH_HEX = "\uff21\uff21"  # looks like AA, is not ASCII hex


@pytest.mark.parametrize("mac", ["zz:bb:cc:dd:ee:ff", "AABBCCDDEEFG", "a b", "a/b", FULLWIDTH_HEX])
async def test_list_mac_with_other_characters_is_400_naming_mac(runtime, client, mac):
    _, ana = await logged_in_user(runtime, client, ANA)
    response = await client.get("/v1/controllers", params={"mac": mac}, headers=ana)
    assert_problem(response, 400, "mac")


@pytest.mark.parametrize(("query", "field"), BAD_PAGING)
async def test_list_bad_page_or_page_size_is_400_naming_it(runtime, client, query, field):
    _, ana = await logged_in_user(runtime, client, ANA)
    assert_problem(await client.get(f"/v1/controllers?{query}", headers=ana), 400, field)


async def test_list_type_with_a_nul_character_is_400_naming_type(runtime, client):
    _, ana = await logged_in_user(runtime, client, ANA)
    await make_owned(runtime, 1)
    assert_problem(await client.get("/v1/controllers?type=smart%00", headers=ana), 400, "type")


async def test_list_page_size_boundaries_1_and_500_are_accepted(runtime, client):
    _, ana = await logged_in_user(runtime, client, ANA)
    await make_owned(runtime, 2)
    one = (await client.get("/v1/controllers?page_size=1", headers=ana)).json()
    assert (len(one["_embedded"]["controller"]), one["page_size"], one["page_count"]) == (1, 1, 2)
    most = (await client.get("/v1/controllers?page_size=500", headers=ana)).json()
    assert (len(most["_embedded"]["controller"]), most["page_size"]) == (2, 500)


async def test_list_default_page_size_is_100_and_total_counts_every_match(runtime, client):
    _, ana = await logged_in_user(runtime, client, ANA)
    made = await make_owned(runtime, 101)
    first = (await client.get("/v1/controllers", headers=ana)).json()
    assert [c["serial_number"] for c in first["_embedded"]["controller"]] == made[:100]
    assert (first["total"], first["page_size"], first["page_count"]) == (101, 100, 2)
    second = await client.get("/v1/controllers?page=2", headers=ana)
    assert serials(second) == made[100:]


async def test_list_page_past_the_last_is_200_and_empty(runtime, client):
    _, ana = await logged_in_user(runtime, client, ANA)
    await make_owned(runtime, 3)
    response = await client.get("/v1/controllers?page=3&page_size=2", headers=ana)
    assert serials(response) == []
    assert (response.json()["total"], response.json()["page_count"]) == (3, 2)


@pytest.mark.parametrize("page", ["99999999999", "9223372036854775808", "1" + "0" * 30])
async def test_list_huge_page_number_is_empty_or_400_never_5xx(runtime, client, page):
    _, ana = await logged_in_user(runtime, client, ANA)
    await make_owned(runtime, 1)
    response = await client.get(f"/v1/controllers?page={page}&page_size=500", headers=ana)
    if response.status_code == 400:
        assert_problem(response, 400, "page")
    else:
        assert serials(response) == []


async def test_list_links_prev_next_only_when_those_pages_exist(runtime, client):
    _, ana = await logged_in_user(runtime, client, ANA)
    await make_owned(runtime, 5)

    async def links(page: int) -> dict[str, dict[str, list[str]]]:
        body = (await client.get(f"/v1/controllers?page={page}&page_size=2", headers=ana)).json()
        return {name: link(value["href"]) for name, value in body["_links"].items()}

    def at(page: int) -> dict[str, list[str]]:
        return {"page": [str(page)], "page_size": ["2"]}

    assert await links(1) == {"self": at(1), "first": at(1), "last": at(3), "next": at(2)}
    assert await links(2) == {
        "self": at(2), "first": at(1), "last": at(3), "prev": at(1), "next": at(3),
    }  # fmt: skip
    assert await links(3) == {"self": at(3), "first": at(1), "last": at(3), "prev": at(2)}
    # past the last page there is no prev or next (docs/DESIGN.md): only self, first, last
    for past in (4, 10):
        assert await links(past) == {"self": at(past), "first": at(1), "last": at(3)}


async def test_an_empty_list_has_one_page_and_no_prev_or_next(runtime, client):
    _, ana = await logged_in_user(runtime, client, ANA)
    for page in (1, 2):
        body = (await client.get(f"/v1/controllers?page={page}", headers=ana)).json()
        assert (body["total"], body["page_count"]) == (0, 1)
        assert set(body["_links"]) == {"self", "first", "last"}, page


async def test_list_links_keep_filters_and_non_default_page_size(runtime, client):
    _, ana = await logged_in_user(runtime, client, ANA)
    for i in range(3):
        await make_controller(runtime, f"M{i}", owner=ANA, type="melissa", mac="AABBCCDDEEFF")
    query = "type=melissa&mac=aa:bb:cc:dd:ee:ff&page=2&page_size=1"
    body = (await client.get(f"/v1/controllers?{query}", headers=ana)).json()
    assert [c["serial_number"] for c in body["_embedded"]["controller"]] == ["M1"]
    assert set(body["_links"]) == {"self", "first", "last", "prev", "next"}
    for name, value in body["_links"].items():
        params = link(value["href"])
        assert params["type"] == ["melissa"] and params["page_size"] == ["1"], name
        assert params["mac"][0].replace(":", "").upper() == "AABBCCDDEEFF", name
        followed = await client.get(value["href"], headers=ana)
        assert followed.json()["total"] == 3, name


async def test_list_links_leave_out_the_default_page_size(runtime, client):
    _, ana = await logged_in_user(runtime, client, ANA)
    body = (await client.get("/v1/controllers?type=bobbie", headers=ana)).json()
    assert link(body["_links"]["self"]["href"]) == {"page": ["1"], "type": ["bobbie"]}


async def test_list_page_sizes_follow_the_configured_default_and_maximum(runtime, database_url):
    settings = Settings(database_url=database_url, default_page_size=2, max_page_size=3)
    async with lent_client(settings) as client:
        _, ana = await logged_in_user(runtime, client, ANA)
        await make_owned(runtime, 4)
        body = (await client.get("/v1/controllers", headers=ana)).json()
        assert (len(body["_embedded"]["controller"]), body["page_size"]) == (2, 2)
        assert (body["total"], body["page_count"]) == (4, 2)
        assert "page_size" not in link(body["_links"]["next"]["href"])
        assert serials(await client.get("/v1/controllers?page_size=3", headers=ana)) == [
            "C000", "C001", "C002",
        ]  # fmt: skip
        too_big = await client.get("/v1/controllers?page_size=4", headers=ana)
        assert_problem(too_big, 400, "page_size")


# --- controller_log (contract §10) ---------------------------------------------------------


async def test_list_items_carry_their_latest_reading_or_an_empty_list(runtime, client, clock):
    _, ana = await logged_in_user(runtime, client, ANA)
    _, bob = await logged_in_user(runtime, client, "bob@example.com")
    await make_controller(runtime, "MEL1", owner=ANA, type="melissa")
    await make_controller(runtime, "PLUG1", owner=ANA)
    await make_controller(runtime, "HANDED", owner=ANA)
    await report(runtime, "MEL1", {"temp": 20.0})
    clock.advance(5)
    await report(runtime, "MEL1", {"temp": 21.5, "humidity": 40.2})
    await report(runtime, "HANDED", {"relay_state": "on"})
    reassign = {"owner": "bob@example.com"}
    handed = await client.patch("/v1/controllers/HANDED/reassign", json=reassign, headers=ana)
    assert handed.status_code == 200
    back = await client.patch("/v1/controllers/HANDED/reassign", json={"owner": ANA}, headers=bob)
    assert back.status_code == 200  # Ana owns it again, under a new ownership
    body = (await client.get("/v1/controllers", headers=ana)).json()
    logs = {c["serial_number"]: c["controller_log"] for c in body["_embedded"]["controller"]}
    assert logs == {
        "MEL1": {"temp": 21.5, "humidity": 40.2, "created": stamp(clock)},
        "PLUG1": [],
        "HANDED": [],  # reported under her previous ownership
    }
    assert not [c for c in body["_embedded"]["controller"] if "_relation" in c]


async def test_list_reads_the_latest_readings_without_a_query_per_controller(runtime, settings):
    """The list is a hot path: its statements do not grow with the page (docs/PERFORMANCE.md)."""
    no_cache = dataclasses.replace(settings, token_cache_ms=0)  # every request checks its token
    async with lent_client(no_cache) as client:
        _, ana = await logged_in_user(runtime, client, ANA)
        database = client.app.state.runtime.database
        await make_controller(runtime, "MEL0", owner=ANA, type="melissa")
        await report(runtime, "MEL0", {"temp": 0})
        with counted_statements(database) as one:
            assert len(serials(await client.get("/v1/controllers", headers=ana))) == 1
        for number in range(1, 25):
            await make_controller(runtime, f"MEL{number}", owner=ANA, type="melissa")
            await report(runtime, f"MEL{number}", {"temp": number})
        with counted_statements(database) as many:
            body = (await client.get("/v1/controllers", headers=ana)).json()
    assert [c["controller_log"]["temp"] for c in body["_embedded"]["controller"]] == list(range(25))
    assert 0 < len(many) == len(one), (one, many)
