"""GET /controllers/{sn}/readings: the current ownership's readings, newest first (§10)."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest

from tests.controllers.helpers import assert_problem
from tests.devices.helpers import ANA, BOB, report
from tests.factories import logged_in_user, make_controller

READINGS = "/v1/controllers/MEL1/readings"


def stamp(clock) -> str:
    return clock.now().strftime("%Y-%m-%d %H:%M:%S")


async def report_every_minute(runtime, clock, count: int) -> list[str]:
    """``count`` readings a minute apart (temp 0, 1, ...); their arrival times."""
    times = []
    for number in range(count):
        if number:
            clock.advance(60)
        await report(runtime, "MEL1", {"temp": number})
        times.append(stamp(clock))
    return times


def temps(response) -> list[int]:
    assert response.status_code == 200, response.text
    return [reading["temp"] for reading in response.json()["_embedded"]["reading"]]


async def test_readings_are_the_reported_fields_plus_created_newest_first(runtime, client, clock):
    _, ana = await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, "MEL1", owner=ANA, type="melissa")
    first = {"temp": 21.5, "humidity": 40.2, "raw_temperature": 21500, "raw_humidity": 40200}
    await report(runtime, "MEL1", first)
    arrived = stamp(clock)
    clock.advance(30)
    await report(runtime, "MEL1", {"temp": 22.0, "created": "device's own", "online": True})
    response = await client.get(READINGS, headers=ana)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/hal+json")
    body = response.json()
    assert body["_embedded"]["reading"] == [
        {"temp": 22.0, "created": stamp(clock), "online": True},  # `created` is the arrival
        {**first, "created": arrived},
    ]
    assert (body["total"], body["page"], body["page_size"], body["page_count"]) == (2, 1, 100, 1)
    plain = await client.get(READINGS.removeprefix("/v1"), headers=ana)
    assert plain.json() == body


async def test_no_readings_is_an_empty_page(runtime, client):
    _, ana = await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, "MEL1", owner=ANA, type="melissa")
    body = (await client.get(READINGS, headers=ana)).json()
    assert body["_embedded"] == {"reading": []}
    assert (body["total"], body["page_count"]) == (0, 1)


async def test_since_is_inclusive_and_until_exclusive(runtime, client, clock):
    _, ana = await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, "MEL1", owner=ANA, type="melissa")
    times = await report_every_minute(runtime, clock, 5)
    get = client.get
    assert temps(await get(READINGS, params={"since": times[1]}, headers=ana)) == [4, 3, 2, 1]
    assert temps(await get(READINGS, params={"until": times[3]}, headers=ana)) == [2, 1, 0]
    window = {"since": times[1], "until": times[3]}
    response = await get(READINGS, params=window, headers=ana)
    assert temps(response) == [2, 1]
    assert response.json()["total"] == 2
    empty = {"since": times[3], "until": times[3]}
    assert temps(await get(READINGS, params=empty, headers=ana)) == []


@pytest.mark.parametrize(
    ("params", "fields"),
    [
        ({"since": "2026-11-21"}, {"since"}),
        ({"since": "2026-11-21T10:00:00"}, {"since"}),
        ({"until": "2026-11-21 10:00"}, {"until"}),
        ({"until": "2026-02-30 10:00:00"}, {"until"}),
        ({"since": "2026-1-21 10:00:00"}, {"since"}),
        ({"since": "\uff12\uff10\uff12\uff16-11-21 10:00:00"}, {"since"}),  # fullwidth
        ({"since": ""}, {"since"}),
        ({"until": "2026-11-21 10:00:00\n"}, {"until"}),
        ({"since": "yesterday", "until": "today"}, {"since", "until"}),
    ],
)
async def test_malformed_bounds_are_400_naming_the_field(runtime, client, params, fields):
    _, ana = await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, "MEL1", owner=ANA, type="melissa")
    body = assert_problem(await client.get(READINGS, params=params, headers=ana), 400)
    assert {error["field"] for error in body["errors"]} == fields


async def test_readings_are_paged_and_links_keep_the_bounds(runtime, client, clock):
    _, ana = await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, "MEL1", owner=ANA, type="melissa")
    times = await report_every_minute(runtime, clock, 6)
    params = {"since": times[1], "page": 2, "page_size": 2}
    response = await client.get(READINGS, params=params, headers=ana)
    assert temps(response) == [3, 2]
    body = response.json()
    assert (body["total"], body["page"], body["page_count"]) == (5, 2, 3)
    for name in ("self", "first", "last", "prev", "next"):
        parts = urlsplit(body["_links"][name]["href"])
        assert parts.path == READINGS
        query = parse_qs(parts.query)
        assert query["since"] == [times[1]] and query["page_size"] == ["2"], name
        assert "until" not in query
    assert parse_qs(urlsplit(body["_links"]["next"]["href"]).query)["page"] == ["3"]
    past = await client.get(READINGS, params={**params, "page": 4}, headers=ana)
    assert temps(past) == [] and past.json()["total"] == 5
    assert_problem(await client.get(READINGS + "?page_size=0", headers=ana), 400, "page_size")


async def test_readings_of_someone_elses_or_an_unknown_controller_are_404(runtime, client):
    _, ana = await logged_in_user(runtime, client, ANA)
    await logged_in_user(runtime, client, BOB)
    await make_controller(runtime, "BOBS", owner=BOB, type="melissa")
    await report(runtime, "BOBS", {"temp": 19.0})
    others = await client.get("/v1/controllers/BOBS/readings?since=bad", headers=ana)
    unknown = await client.get("/v1/controllers/NOPE/readings?since=bad", headers=ana)
    assert_problem(others, 404)
    assert others.text == unknown.text.replace("NOPE", "BOBS")


async def test_a_new_owner_sees_none_of_the_old_owners_readings(runtime, client, clock):
    _, ana = await logged_in_user(runtime, client, ANA)
    _, bob = await logged_in_user(runtime, client, BOB)
    await make_controller(runtime, "MEL1", type="melissa")
    await report(runtime, "MEL1", {"temp": 1})  # nobody owned it then
    assert (await client.post("/v1/controllers/MEL1/assign", headers=ana)).status_code == 200
    clock.advance(1)
    await report(runtime, "MEL1", {"temp": 2})
    assert temps(await client.get(READINGS, headers=ana)) == [2]
    handed = await client.patch("/v1/controllers/MEL1/reassign", json={"owner": BOB},
                                headers=ana)  # fmt: skip
    assert handed.status_code == 200
    assert temps(await client.get(READINGS, headers=bob)) == []
    assert_problem(await client.get(READINGS, headers=ana), 404)
    await report(runtime, "MEL1", {"temp": 3})  # in the same second as the hand-over
    assert temps(await client.get(READINGS, headers=bob)) == [3]
