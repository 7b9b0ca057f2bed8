"""GET /controllers/{sn}/readings/summary: buckets computed in the database (both engines),
local days for ``1d``, a plug's energy, the bucket limit, and the ownership rules."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import msgspec
import pytest
from sqlalchemy import update

from devicecontrol.database.tables import users
from devicecontrol.devices.readings import repository as readings_repository
from devicecontrol.devices.readings.repository import ArrivedReading
from devicecontrol.geo import Place
from devicecontrol.users import repository as users_repository
from tests.controllers.helpers import assert_problem
from tests.devices.helpers import ANA, BOB, device_row
from tests.factories import logged_in_user, make_controller

SUMMARY = "/v1/controllers/{}/readings/summary"
BERLIN = Place(2950159, "EU", "Europe", "DE", "Germany", "Berlin", "Europe/Berlin")


def at(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%d %H:%M:%S")


async def report_at(runtime, serial_number: str, *readings: tuple[str, dict[str, Any]]) -> None:
    """Readings that arrived at the given UTC times, stored as the link stores them."""
    device = await device_row(runtime, serial_number)
    arrived = [
        ArrivedReading(device.id, msgspec.json.encode(payload).decode(), at(moment))
        for moment, payload in readings
    ]
    async with runtime.database.write() as connection:
        await readings_repository.insert_readings(connection, arrived)


async def live_in(runtime, user_id: int, place: Place) -> None:
    async with runtime.database.write() as connection:
        country_id = await users_repository.find_or_create_country(connection, place)
        await connection.execute(
            update(users).where(users.c.id == user_id).values(country_id=country_id)
        )


async def summary_of(client, headers, serial_number: str, **params: str) -> dict[str, Any]:
    response = await client.get(SUMMARY.format(serial_number), params=params, headers=headers)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/hal+json")
    return response.json()["summary"]


async def test_each_numeric_field_has_min_max_avg_per_bucket_and_empty_ones_are_left_out(
    runtime, client
):
    _, ana = await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, "MEL1", owner=ANA, type="melissa")
    await report_at(
        runtime,
        "MEL1",
        ("2026-11-20 10:05:00", {"temp": 20, "humidity": 40.5, "mode": "cool", "on": True}),
        ("2026-11-20 10:35:00", {"temp": 23, "humidity": 41.5, "levels": [1, 2.5, "x"]}),
        ("2026-11-20 10:59:59", {"temp": 21.5, "nested": {"temp": 99}, "levels": []}),
        ("2026-11-20 12:00:00", {"temp": -4}),
    )
    body = await summary_of(
        client, ana, "MEL1", since="2026-11-20 10:00:00", until="2026-11-20 13:00:00", every="1h"
    )
    assert body["serial_number"] == "MEL1" and body["every"] == "1h"
    assert body["time_zone"] == "UTC"
    assert (body["since"], body["until"]) == ("2026-11-20 10:00:00", "2026-11-20 13:00:00")
    assert body["buckets"] == [
        {
            "start": "2026-11-20 10:00:00",
            "count": 3,
            "humidity": {"min": 40.5, "max": 41.5, "avg": 41.0},
            # a list counts as the sum of its numbers; an empty one is no value
            "levels": {"min": 3.5, "max": 3.5, "avg": 3.5},
            "temp": {"min": 20.0, "max": 23.0, "avg": 21.5},
        },
        {
            "start": "2026-11-20 12:00:00",
            "count": 1,
            "temp": {"min": -4.0, "max": -4.0, "avg": -4.0},
        },
    ]


async def test_buckets_shorter_than_a_day_are_whole_multiples_in_utc(runtime, client):
    _, ana = await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, "MEL1", owner=ANA, type="melissa")
    await report_at(
        runtime,
        "MEL1",
        ("2026-11-20 10:14:59", {"temp": 1}),
        ("2026-11-20 10:15:00", {"temp": 2}),
        ("2026-11-20 10:29:00", {"temp": 4}),
    )
    window = {"since": "2026-11-20 10:07:00", "until": "2026-11-20 10:30:00"}
    quarter = await summary_of(client, ana, "MEL1", every="15m", **window)
    assert [(b["start"], b["count"], b["temp"]["avg"]) for b in quarter["buckets"]] == [
        ("2026-11-20 10:00:00", 1, 1.0),
        ("2026-11-20 10:15:00", 2, 3.0),
    ]
    minutes = await summary_of(client, ana, "MEL1", every="1m", **window)
    assert [b["start"] for b in minutes["buckets"]] == [
        "2026-11-20 10:14:00",
        "2026-11-20 10:15:00",
        "2026-11-20 10:29:00",
    ]


async def test_days_are_the_owners_local_days_across_a_summer_time_change(runtime, client):
    user_id, ana = await logged_in_user(runtime, client, ANA)
    await live_in(runtime, user_id, BERLIN)
    await make_controller(runtime, "MEL1", owner=ANA, type="melissa")
    # Berlin leaves summer time at 01:00 UTC on 2026-10-25: that local day lasts 25 hours
    await report_at(
        runtime,
        "MEL1",
        ("2026-10-23 21:59:59", {"temp": 1}),  # 23:59:59 on the 23rd, local
        ("2026-10-23 22:00:00", {"temp": 2}),  # midnight of the 24th
        ("2026-10-24 22:00:00", {"temp": 3}),  # midnight of the 25th (still summer time)
        ("2026-10-25 22:59:59", {"temp": 4}),  # 23:59:59 on the 25th (winter time)
        ("2026-10-25 23:00:00", {"temp": 5}),  # midnight of the 26th
    )
    body = await summary_of(
        client, ana, "MEL1", since="2026-10-23 00:00:00", until="2026-10-27 00:00:00", every="1d"
    )
    assert body["time_zone"] == "Europe/Berlin"
    assert [(b["start"], b["count"], b["temp"]["max"]) for b in body["buckets"]] == [
        ("2026-10-22 22:00:00", 1, 1.0),
        ("2026-10-23 22:00:00", 1, 2.0),
        ("2026-10-24 22:00:00", 2, 4.0),
        ("2026-10-25 23:00:00", 1, 5.0),
    ]


async def test_a_plugs_energy_integrates_its_power_without_bridging_long_gaps(runtime, client):
    _, ana = await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, "PLUG1", owner=ANA, type="smart_plug")
    await report_at(
        runtime,
        "PLUG1",
        ("2026-11-20 10:50:00", {"power": [100.0], "relay_state": "on"}),
        ("2026-11-20 10:56:00", {"power": [200.0, 100.0], "relay_state": "on"}),
        # a trapezoid is credited to its later reading's bucket: 6 min at 300 W
        ("2026-11-20 11:02:00", {"power": [300.0], "relay_state": "on"}),
        # 10 min 1 s later: not integrated across the gap
        ("2026-11-20 11:12:01", {"power": [0.0], "relay_state": "off"}),
        ("2026-11-20 11:22:01", {"power": [60.0], "relay_state": "on"}),  # exactly 10 min
        ("2026-11-20 13:00:00", {"relay_state": "on"}),  # no power: no energy, still counted
    )
    body = await summary_of(
        client, ana, "PLUG1", since="2026-11-20 10:00:00", until="2026-11-20 14:00:00", every="1h"
    )
    buckets = body["buckets"]
    # 6 min at (100+300)/2 W = 20 Wh; then 6 min at 300 W = 30 Wh and 10 min at 30 W = 5 Wh
    assert [(b["start"], b["count"], b["energy_wh"]) for b in buckets] == [
        ("2026-11-20 10:00:00", 2, 20.0),
        ("2026-11-20 11:00:00", 3, 35.0),
        ("2026-11-20 13:00:00", 1, 0.0),
    ]
    assert buckets[0]["power"] == {"min": 100.0, "max": 300.0, "avg": 200.0}
    assert "power" not in buckets[2]


@pytest.mark.parametrize("backend", ["sqlite"])
async def test_a_melissa_has_no_energy(runtime, client):
    """SQLite alone: whether energy is asked for follows the type, not the engine."""
    _, ana = await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, "MEL1", owner=ANA, type="melissa")
    await report_at(runtime, "MEL1", ("2026-11-20 10:00:00", {"power": [5]}))
    body = await summary_of(
        client, ana, "MEL1", since="2026-11-20 10:00:00", until="2026-11-20 11:00:00"
    )
    assert "energy_wh" not in body["buckets"][0]


@pytest.mark.parametrize("backend", ["sqlite"])
async def test_defaults_are_the_last_24_hours_in_the_finest_buckets_that_fit(
    runtime, client, clock
):
    """SQLite alone: the defaults are chosen before any query."""
    _, ana = await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, "MEL1", owner=ANA, type="melissa")
    now = clock.now().replace(tzinfo=None, microsecond=0)
    stamp = now.strftime("%Y-%m-%d %H:%M:%S")
    body = await summary_of(client, ana, "MEL1")
    assert body["until"] == stamp
    assert at(body["since"]) == now - timedelta(hours=24)
    assert body["every"] == "5m"  # 1,440 one-minute buckets would be too many
    hour = await summary_of(client, ana, "MEL1", since=(now - timedelta(hours=1)).strftime(
        "%Y-%m-%d %H:%M:%S"))  # fmt: skip
    assert hour["every"] == "1m"


BAD = [
    ({"every": "2h"}, "every"),
    ({"every": "1m", "since": "2026-11-20 00:00:00", "until": "2026-11-21 00:00:00"}, "every"),
    ({"every": "1d", "since": "2020-01-01 00:00:00", "until": "2026-01-01 00:00:00"}, "every"),
    ({"since": "2026-11-20 00:00:00", "until": "2026-11-20 00:00:00"}, "since"),
    ({"since": "2026-11-20 00:00"}, "since"),
]


@pytest.mark.parametrize("backend", ["sqlite"])
async def test_a_bad_range_or_width_is_400_naming_the_field(runtime, client):
    """SQLite alone: each is refused before any query."""
    _, ana = await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, "MEL1", owner=ANA, type="melissa")
    for params, field in BAD:
        response = await client.get(SUMMARY.format("MEL1"), params=params, headers=ana)
        assert_problem(response, 400, field)


@pytest.mark.parametrize("backend", ["sqlite"])
async def test_exactly_1000_buckets_is_allowed(runtime, client):
    """SQLite alone: the limit is checked before any query."""
    _, ana = await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, "MEL1", owner=ANA, type="melissa")
    start = at("2026-11-20 00:00:00")
    window = {
        "since": start.strftime("%Y-%m-%d %H:%M:%S"),
        "until": (start + timedelta(minutes=1000)).strftime("%Y-%m-%d %H:%M:%S"),
    }
    assert (await summary_of(client, ana, "MEL1", every="1m", **window))["buckets"] == []
    over = {**window, "until": (start + timedelta(minutes=1000, seconds=1)).strftime(
        "%Y-%m-%d %H:%M:%S")}  # fmt: skip
    response = await client.get(SUMMARY.format("MEL1"), params={**over, "every": "1m"},
                                headers=ana)  # fmt: skip
    assert_problem(response, 400, "every")


async def test_someone_elses_or_an_unknown_controller_is_404_before_the_parameters(runtime, client):
    _, ana = await logged_in_user(runtime, client, ANA)
    await logged_in_user(runtime, client, BOB)
    await make_controller(runtime, "BOBS", owner=BOB, type="melissa")
    await report_at(runtime, "BOBS", ("2026-11-20 10:00:00", {"temp": 19.0}))
    others = await client.get(SUMMARY.format("BOBS") + "?every=2h", headers=ana)
    unknown = await client.get(SUMMARY.format("NOPE") + "?every=2h", headers=ana)
    assert_problem(others, 404)
    assert others.text == unknown.text.replace("NOPE", "BOBS")
    assert_problem(await client.get(SUMMARY.format("BOBS")), 401)


async def test_a_new_owner_summarizes_none_of_the_old_owners_readings(runtime, client):
    _, ana = await logged_in_user(runtime, client, ANA)
    _, bob = await logged_in_user(runtime, client, BOB)
    await make_controller(runtime, "MEL1", owner=ANA, type="melissa")
    await report_at(runtime, "MEL1", ("2026-11-20 10:00:00", {"temp": 1}))
    handed = await client.patch("/v1/controllers/MEL1/reassign", json={"owner": BOB},
                                headers=ana)  # fmt: skip
    assert handed.status_code == 200
    await report_at(runtime, "MEL1", ("2026-11-20 10:30:00", {"temp": 3}))
    window = {"since": "2026-11-20 00:00:00", "until": "2026-11-21 00:00:00", "every": "1d"}
    buckets = (await summary_of(client, bob, "MEL1", **window))["buckets"]
    assert [(b["count"], b["temp"]["avg"]) for b in buckets] == [(1, 3.0)]


@pytest.mark.parametrize("backend", ["sqlite"])
async def test_the_self_link_names_the_range_and_width_answered(runtime, client):
    """SQLite alone: the link is written from the parameters answered."""
    _, ana = await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, "MEL1", owner=ANA, type="melissa")
    params = {"since": "2026-11-20 00:00:00", "until": "2026-11-21 00:00:00"}
    response = await client.get(SUMMARY.format("MEL1").removeprefix("/v1"), params=params,
                                headers=ana)  # fmt: skip
    assert response.status_code == 200
    assert response.json()["_links"]["self"]["href"] == (
        "/v1/controllers/MEL1/readings/summary"
        "?since=2026-11-20+00%3A00%3A00&until=2026-11-21+00%3A00%3A00&every=5m"
    )


CALENDAR_ENDS = [
    ({"every": "1d", "since": "9999-12-31 00:00:00", "until": "9999-12-31 23:59:59"}, "since"),
    ({"every": "1h", "since": "9999-12-30 00:00:00", "until": "9999-12-31 00:00:00"}, "until"),
    ({"since": "0001-01-01 00:00:00", "until": "0001-01-02 00:00:00"}, "since"),
]


async def test_a_range_at_the_calendars_ends_is_400_and_one_a_day_inside_is_summarized(
    runtime, client
):
    """Local days and bucket ends near year 1 or 9999 are still dates, in a zone east of UTC
    too: no OverflowError (a 500) at the ends, and a summary a day inside them."""
    ana_id, ana = await logged_in_user(runtime, client, ANA)
    await live_in(runtime, ana_id, BERLIN)
    await make_controller(runtime, "MEL1", owner=ANA, type="melissa")
    for params, field in CALENDAR_ENDS:
        response = await client.get(SUMMARY.format("MEL1"), params=params, headers=ana)
        assert_problem(response, 400, field)
    for every, since, until in (
        ("1d", "9999-12-28 00:00:00", "9999-12-30 00:00:00"),
        ("1h", "9999-12-29 00:00:00", "9999-12-30 00:00:00"),
        ("1d", "0001-01-02 00:00:00", "0001-01-04 00:00:00"),
    ):
        summary = await summary_of(client, ana, "MEL1", every=every, since=since, until=until)
        assert summary["buckets"] == []
