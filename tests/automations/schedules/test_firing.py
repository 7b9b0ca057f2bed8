"""The schedule runner (contract §12) with the injectable clock: the command at from_time
and the end command at to_time, exactly once across runners, late firings within the grace,
the rest skipped and counted. No test waits for a real minute."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import replace
from datetime import timedelta

import pytest
from litestar.testing import AsyncTestClient
from sqlalchemy import update

from devicecontrol.app import create_app
from devicecontrol.automations.schedules import runner
from devicecontrol.clock import utcnow
from devicecontrol.config import Settings
from devicecontrol.controllers.service import reassign_controller
from devicecontrol.database.tables import schedules
from devicecontrol.runtime import Runtime
from devicecontrol.users.identity import username_key
from devicecontrol.users.repository import find_active_user_id
from devicecontrol.users.service import disable_user
from tests.automations.schedules.helpers import (
    PLUG_OFF,
    clock_at,
    firings,
    make_schedule,
    reread,
    skips,
)
from tests.devices.helpers import ANA, BOB, command_rows, make_commands
from tests.factories import make_controller, make_user


@pytest.fixture
async def ana(runtime) -> int:
    user_id = await make_user(runtime, ANA)
    await make_controller(runtime, "PLUG1", owner=ANA, type="smart_plug")
    return user_id


async def test_it_fires_at_from_time_and_the_end_at_to_time(runtime, ana):
    with clock_at(2026, 11, 23, 6, 59, 30) as clock:  # a Monday
        schedule = await make_schedule(
            runtime, ana, from_time="07:00", to_time="07:30", time_zone="UTC", **PLUG_OFF
        )
        assert await runner.fire_due(runtime) == []  # 30 s early
        started = firings("start")
        clock.advance(30)
        (fired,) = await runner.fire_due(runtime)
        assert (fired.kind, fired.outcome) == ("start", runner.FIRED)
        assert firings("start") == started + 1
        (command,) = await command_rows(runtime, "PLUG1")
        assert (command.name, command.params, command.status) == (
            "switch_on_off", '{"state":"on"}', "queued")  # fmt: skip
        shown = await reread(runtime, schedule)
        assert shown.last_command_id == fired.command_id == command.public_id
        assert str(shown.last_fired_at) == "2026-11-23 07:00:00"
        assert await runner.fire_due(runtime) == []  # once
        clock.advance(30 * 60)
        (ended,) = await runner.fire_due(runtime)
        assert (ended.kind, ended.outcome) == ("end", runner.FIRED)
        commands = await command_rows(runtime, "PLUG1")
        assert [c.params for c in commands] == ['{"state":"on"}', '{"state":"off"}']
        assert str((await reread(runtime, schedule)).next_fire_at) == "2026-11-24 07:00:00"


async def test_the_spring_gap_fires_at_the_first_minute_after_it(runtime, ana):
    # Europe/Berlin, 29 March 2026: 02:30 does not exist; 03:00 CEST is 01:00 UTC
    with clock_at(2026, 3, 28, 22) as clock:
        schedule = await make_schedule(runtime, ana, from_time="02:30", time_zone="Europe/Berlin")
        assert str(schedule.next_fire_at) == "2026-03-29 01:00:00"
        clock.advance(3 * 3600 - 1)  # 00:59:59 UTC, 01:59:59 CET
        assert await runner.fire_due(runtime) == []
        clock.advance(1)
        assert len(await runner.fire_due(runtime)) == 1


async def test_a_time_that_happens_twice_fires_once(runtime, ana):
    # Europe/Berlin, 25 October 2026: 02:30 is 00:30 UTC (CEST) and again 01:30 UTC (CET)
    with clock_at(2026, 10, 24, 22) as clock:
        schedule = await make_schedule(runtime, ana, from_time="02:30", time_zone="Europe/Berlin")
        clock.advance(2.5 * 3600)
        assert len(await runner.fire_due(runtime)) == 1
        clock.advance(3600)  # 02:30 CET
        assert await runner.fire_due(runtime) == []
        assert len(await command_rows(runtime, "PLUG1")) == 1
        assert str((await reread(runtime, schedule)).next_fire_at) == "2026-10-26 01:30:00"


async def test_a_firing_missed_within_the_grace_fires_late_and_past_it_is_skipped(runtime, ana):
    with clock_at(2026, 11, 23, 6) as clock:
        schedule = await make_schedule(runtime, ana, from_time="07:00", time_zone="UTC")
        clock.advance(3600 + 600)  # down until 07:10: exactly the grace late
        (late,) = await runner.fire_due(runtime)
        assert late.outcome == runner.FIRED
        skipped = skips("late")
        clock.advance(86400 + 1)  # down again, until 07:10:01 the next day
        (missed,) = await runner.fire_due(runtime)
        assert missed.outcome == runner.LATE
        assert skips("late") == skipped + 1
        assert len(await command_rows(runtime, "PLUG1")) == 1
        shown = await reread(runtime, schedule)
        assert str(shown.next_fire_at) == "2026-11-25 07:00:00"
        assert str(shown.last_fired_at) == "2026-11-23 07:10:00"  # the last one that fired


async def test_a_long_stop_skips_every_firing_it_missed_but_the_last_within_grace(runtime, ana):
    with clock_at(2026, 11, 23, 6) as clock:
        await make_schedule(runtime, ana, from_time="07:00", time_zone="UTC")
        clock.advance(3 * 86400 + 3600 + 60)  # back at 07:01, three days on
        outcomes = [f.outcome for f in await runner.fire_due(runtime)]
        assert outcomes == [runner.LATE, runner.LATE, runner.LATE, runner.FIRED]


async def test_the_grace_is_a_setting(runtime, ana):
    strict = Runtime(replace(runtime.settings, schedule_grace_s=0), runtime.database)
    with clock_at(2026, 11, 23, 6) as clock:
        await make_schedule(runtime, ana, from_time="07:00", time_zone="UTC")
        clock.advance(3601)
        assert [f.outcome for f in await runner.fire_due(strict)] == [runner.LATE]


async def test_two_runners_racing_on_one_database_fire_each_firing_once(runtime, ana, settings):
    others = [Runtime.from_settings(settings) for _ in range(3)]
    try:
        with clock_at(2026, 11, 23, 6, 59) as clock:
            await make_schedule(runtime, ana, from_time="07:00", time_zone="UTC")
            clock.advance(60)
            results = await asyncio.gather(*(runner.fire_due(r) for r in [runtime, *others]))
        assert sum(len(fired) for fired in results) == 1
        assert len(await command_rows(runtime, "PLUG1")) == 1
    finally:
        for other in others:
            await other.close()


async def test_an_inactive_schedule_fires_nothing(runtime, ana):
    with clock_at(2026, 11, 23, 6) as clock:
        schedule = await make_schedule(runtime, ana, active=0)
        assert schedule.next_fire_at is None
        clock.advance(2 * 86400)
        assert await runner.fire_due(runtime) == []


async def test_at_start_up_the_runner_fires_what_was_missed_and_sleeps_until_the_next(runtime, ana):
    with clock_at(2026, 11, 23, 7, 5):
        await make_schedule(runtime, ana, from_time="07:00", time_zone="UTC")
    with clock_at(2026, 11, 24, 7, 4, 58):  # the service was down from before 07:00
        task = asyncio.create_task(runner.fire_schedules_periodically(runtime))
        try:
            for _ in range(100):
                if await command_rows(runtime, "PLUG1"):
                    break
                await asyncio.sleep(0.02)
            assert len(await command_rows(runtime, "PLUG1")) == 1
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        # the next firing is a day away: the check interval bounds the sleep
        assert await runner.seconds_until_next(runtime) == runtime.settings.schedule_check_s
    with clock_at(2026, 11, 25, 6, 59, 57):
        assert await runner.seconds_until_next(runtime) == 3


async def test_a_controller_with_100_unfinished_commands_skips_the_firing(runtime, ana):
    with clock_at(2026, 11, 23, 6, 59) as clock:
        await make_commands(runtime, ana, "PLUG1", 100, fields={"state": "on"})
        await make_schedule(runtime, ana, from_time="07:00", time_zone="UTC")
        clock.advance(60)
        assert [f.outcome for f in await runner.fire_due(runtime)] == [runner.TOO_MANY_COMMANDS]


async def test_a_database_outage_is_logged_once_without_a_traceback(tmp_path, caplog):
    unreachable = Settings(database_url=f"sqlite:///{tmp_path}/no/such/dir/x.db")
    runtime = Runtime.from_settings(replace(unreachable, schedule_check_s=1))
    caplog.set_level(logging.INFO, logger="devicecontrol.schedules")
    task = asyncio.create_task(runner.fire_schedules_periodically(runtime))
    try:
        await asyncio.sleep(1.2)  # two attempts, a check apart
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await runtime.close()
    records = [r for r in caplog.records if r.name == "devicecontrol.schedules"]
    assert [r.getMessage() for r in records] == [
        "database unavailable: schedules wait for it (OperationalError)"
    ]
    assert records[0].exc_info is None


async def test_the_app_of_serve_fires_due_schedules_from_start_up(runtime, ana, settings):
    """create_app(schedule_runner=True) is what every serve process runs (in-process apps
    of the tests leave firing to the tests)."""
    schedule = await make_schedule(runtime, ana, from_time="07:00", time_zone="UTC")
    async with runtime.database.write() as connection:  # missed a minute ago: within grace
        await connection.execute(
            update(schedules)
            .where(schedules.c.id == schedule.id)
            .values(next_fire_at=utcnow() - timedelta(minutes=1))
        )
    async with AsyncTestClient(app=create_app(settings, schedule_runner=True)):
        for _ in range(100):
            if await command_rows(runtime, "PLUG1"):
                break
            await asyncio.sleep(0.02)
    assert len(await command_rows(runtime, "PLUG1")) == 1


async def test_a_disabled_accounts_schedule_fires_nothing(runtime, ana):
    with clock_at(2026, 11, 23, 6, 59) as clock:
        await make_schedule(runtime, ana, from_time="07:00", time_zone="UTC")
        await disable_user(runtime, ANA)
        clock.advance(60)
        assert [f.outcome for f in await runner.fire_due(runtime)] == [runner.NOT_OWNED]
        assert await command_rows(runtime, "PLUG1") == []


async def test_a_firing_racing_a_hand_over_leaves_no_command_of_the_old_owner(
    runtime, ana, settings
):
    """Whichever wins, the hand-over fails what the firing made (or the firing finds its
    schedule gone): nothing of the previous ownership stays queued."""
    await make_user(runtime, BOB)
    owners = [(ANA, BOB), (BOB, ANA)]
    other = Runtime.from_settings(settings)
    try:
        with clock_at(2026, 11, 23, 6, 59) as clock:
            for round_ in range(6):
                owner, successor = owners[round_ % 2]
                owner_id = await _user_id(runtime, owner)
                await make_schedule(runtime, owner_id, from_time="07:00", time_zone="UTC")
                clock.advance(60)
                await asyncio.gather(
                    runner.fire_due(other),
                    reassign_controller(runtime, owner_id, "PLUG1", new_owner=successor),
                )
                clock.advance(86400 - 60)
        statuses = [c.status for c in await command_rows(runtime, "PLUG1")]
        assert "queued" not in statuses, statuses
    finally:
        await other.close()


async def _user_id(runtime: Runtime, email: str) -> int:
    async with runtime.database.read() as connection:
        found = await find_active_user_id(connection, username_key(email))
    assert found is not None
    return found


async def test_firings_skipped_for_one_reason_are_logged_once_then_counted(runtime, ana, caplog):
    """Five firings late at once: one line for the first, one for the other four once a
    pass skips none; the metric counts all five."""
    with clock_at(2026, 11, 23, 6) as clock, caplog.at_level(logging.INFO, "devicecontrol"):
        for _ in range(5):
            await make_schedule(runtime, ana, from_time="07:00", time_zone="UTC")
        skipped = skips("late")
        clock.advance(86400)  # 06:00 the next day: yesterday's 07:00 is a day late
        outcomes = [f.outcome for f in await runner.fire_due(runtime)]
        assert outcomes == [runner.LATE] * 5
        assert skips("late") == skipped + 5
        clock.advance(1)
        assert await runner.fire_due(runtime) == []
    lines = [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()]
    assert len(lines) == 2, lines
    assert "(late)" in lines[0] and lines[1] == "4 more schedule firings were skipped (late)"
