"""Readings rolled up by quarter hour: a summary reads the rollups and answers exactly what
it answers from the readings, and reads the readings again wherever a rollup no longer
counts what the table holds."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from sqlalchemy import func, select

from devicecontrol.database.tables import reading_rollup_progress, reading_rollups
from devicecontrol.devices.readings import rolling
from devicecontrol.housekeeping import purge as purging
from tests.devices.helpers import ANA, BOB
from tests.devices.test_readings_summary import BERLIN, at, live_in, report_at, summary_of
from tests.factories import logged_in_user, make_controller, make_user

DAY = {"since": "2026-10-24 00:00:00", "until": "2026-10-27 00:00:00"}
LATER = at("2026-12-01 00:00:00")


def history(start: str, minutes: int, step_s: int = 97) -> list[tuple[str, dict]]:
    """Readings every ``step_s`` seconds, with a silence of 20 minutes in the middle."""
    first = at(start)
    made = []
    for number in range(minutes * 60 // step_s):
        moment = first + timedelta(seconds=number * step_s)
        if timedelta(hours=2) <= moment - first < timedelta(hours=2, minutes=20):
            continue
        made.append(
            (
                moment.strftime("%Y-%m-%d %H:%M:%S"),
                {
                    "power": [number % 7 * 10.0, 1.5],
                    "temp": 20 + number % 5,
                    "relay_state": "on",
                },
            )
        )
    return made


async def rollup_rows(runtime) -> int:
    async with runtime.database.read() as connection:
        return (
            await connection.execute(select(func.count()).select_from(reading_rollups))
        ).scalar_one()


async def roll_everything(runtime, monkeypatch) -> None:
    monkeypatch.setattr(rolling, "BUDGET_S", 60.0)
    await rolling.roll_up_due(runtime.database, now=LATER)


async def test_a_summary_from_rollups_is_the_summary_from_readings(runtime, client, monkeypatch):
    user_id, ana = await logged_in_user(runtime, client, ANA)
    await live_in(runtime, user_id, BERLIN)  # its summer time ends on 2026-10-25
    await make_controller(runtime, "PLUG1", owner=ANA, type="smart_plug")
    await report_at(runtime, "PLUG1", *history("2026-10-24 21:53:10", 9 * 60))
    widths = ("15m", "1h", "1d")
    # whole days, and a range that cuts quarter hours (its edges are read raw)
    edges = {"since": "2026-10-24 22:07:31", "until": "2026-10-25 05:41:02"}
    windows = [{**window, "every": every} for window in (DAY, edges) for every in widths]
    from_readings = [await summary_of(client, ana, "PLUG1", **window) for window in windows]
    assert await rollup_rows(runtime) == 0
    await roll_everything(runtime, monkeypatch)
    assert await rollup_rows(runtime) > 0
    for window, expected in zip(windows, from_readings, strict=True):
        assert await summary_of(client, ana, "PLUG1", **window) == expected, window
    async with runtime.database.write() as connection:  # the rollups disappear: read raw
        await connection.execute(reading_rollups.delete())
    assert await summary_of(client, ana, "PLUG1", **windows[1]) == from_readings[1]
    assert sum(bucket["count"] for bucket in from_readings[0]["buckets"]) == len(
        history("2026-10-24 21:53:10", 9 * 60)
    )


async def test_a_reading_stored_after_its_quarter_hour_was_rolled_up_still_counts(
    runtime, client, monkeypatch
):
    _, ana = await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, "PLUG1", owner=ANA, type="smart_plug")
    await report_at(runtime, "PLUG1", *history("2026-10-24 10:00:00", 60))
    await roll_everything(runtime, monkeypatch)
    window = {"since": "2026-10-24 10:00:00", "until": "2026-10-24 11:00:00", "every": "1h"}
    rolled = (await summary_of(client, ana, "PLUG1", **window))["buckets"][0]
    await report_at(runtime, "PLUG1", ("2026-10-24 10:20:00", {"power": [1000.0], "temp": 99}))
    late = (await summary_of(client, ana, "PLUG1", **window))["buckets"][0]
    assert late["count"] == rolled["count"] + 1
    assert late["temp"]["max"] == 99.0 and late["power"]["max"] == 1000.0
    assert late["energy_wh"] > rolled["energy_wh"]


async def test_rolling_goes_block_by_block_and_each_ownership_apart(runtime, client, monkeypatch):
    _, ana = await logged_in_user(runtime, client, ANA)
    _, bob = await logged_in_user(runtime, client, BOB)
    await make_controller(runtime, "PLUG1", owner=ANA, type="smart_plug")
    await make_controller(runtime, "PLUG2", owner=BOB, type="smart_plug")
    await report_at(runtime, "PLUG1", *history("2026-10-24 10:00:00", 45))
    await report_at(runtime, "PLUG2", *history("2026-10-24 10:00:00", 45, step_s=61))
    window = {"since": "2026-10-24 10:00:00", "until": "2026-10-24 11:00:00", "every": "15m"}
    expected = [await summary_of(client, headers, sn, **window)
                for headers, sn in ((ana, "PLUG1"), (bob, "PLUG2"))]  # fmt: skip
    monkeypatch.setattr(rolling, "CONTROLLERS_AT_ONCE", 1)
    monkeypatch.setattr(rolling, "READINGS_AT_ONCE", 0)
    await roll_everything(runtime, monkeypatch)
    async with runtime.database.read() as connection:
        owners = (
            await connection.execute(
                select(func.count(func.distinct(reading_rollups.c.assignment_id)))
            )
        ).scalar_one()
        progress = (await connection.execute(select(reading_rollup_progress))).one()
    assert owners == 2
    assert progress.rolled_until == at("2026-12-01 00:00:00") - timedelta(minutes=15)
    for (headers, sn), summary in zip(((ana, "PLUG1"), (bob, "PLUG2")), expected, strict=True):
        assert await summary_of(client, headers, sn, **window) == summary


async def test_rolling_stops_at_the_quarter_hour_not_yet_settled(runtime):
    await make_user(runtime, ANA)
    await make_controller(runtime, "PLUG1", owner=ANA, type="smart_plug")
    await report_at(runtime, "PLUG1", ("2026-10-24 10:05:00", {"power": [1.0]}))
    await report_at(runtime, "PLUG1", ("2026-10-24 10:14:00", {"power": [3.0]}))
    await rolling.roll_up_due(runtime.database, now=at("2026-10-24 10:15:59"))
    assert await rollup_rows(runtime) == 0  # ended less than a minute ago
    await rolling.roll_up_due(runtime.database, now=at("2026-10-24 10:16:00"))
    async with runtime.database.read() as connection:
        rows = {
            row.field: row
            for row in await connection.execute(select(reading_rollups))
        }  # fmt: skip
    assert set(rows) == {"", "power"}
    assert (rows[""].readings, rows[""].energy_wh) == (2, pytest.approx(0.3))  # 9 min at 2 W
    assert (rows["power"].minimum, rows["power"].maximum, rows["power"].total) == (1, 3, 4)


async def test_the_purge_removes_rollups_past_the_retention(runtime, monkeypatch, settings):
    await make_user(runtime, ANA)
    await make_controller(runtime, "PLUG1", owner=ANA, type="smart_plug")
    old = datetime(2020, 1, 1, 10, 0)
    await report_at(runtime, "PLUG1", (old.strftime("%Y-%m-%d %H:%M:%S"), {"power": [1.0]}))
    await report_at(runtime, "PLUG1", ("2026-10-24 10:01:00", {"power": [1.0]}))
    await roll_everything(runtime, monkeypatch)
    assert await rollup_rows(runtime) == 4
    monkeypatch.setattr(purging, "PURGE_BATCH_ROWS", 1)  # one rollup a transaction
    await purging.purge(runtime.database, settings, now=at("2026-10-25 00:00:00"))
    async with runtime.database.read() as connection:
        left = list(await connection.execute(select(reading_rollups.c.period_start).distinct()))
    assert [row.period_start for row in left] == [at("2026-10-24 10:00:00")]
