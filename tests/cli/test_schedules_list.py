"""`devicecontrol schedules list [--owner EMAIL] [--serial SN] [--limit N] [--format]`:
what fires next, per controller."""

from __future__ import annotations

import json

from tests.automations.schedules.helpers import PLUG_OFF, clock_at, make_schedule
from tests.cli.support import assert_one_line_error, assert_succeeded, cli
from tests.devices.helpers import ANA, BOB
from tests.factories import make_controller, make_user


async def test_schedules_are_listed_by_next_firing_with_owner_and_local_time(database_url, runtime):
    ana = await make_user(runtime, ANA)
    bob = await make_user(runtime, BOB)
    await make_controller(runtime, "PLUG1", owner=ANA, type="smart_plug")
    await make_controller(runtime, "PLUG2", owner=BOB, type="smart_plug")
    with clock_at(2026, 11, 23, 6):  # a Monday
        await make_schedule(runtime, ana, from_time="09:00", time_zone="Europe/Sofia")  # 07:00
        await make_schedule(runtime, bob, controller_id="PLUG2", from_time="06:30",
                            to_time="06:45", time_zone="UTC", **PLUG_OFF)  # fmt: skip
        await make_schedule(runtime, ana, active=0)
    result = await cli("schedules", "list", "--format", "json", database_url=database_url)
    assert_succeeded(result)
    listed = json.loads(result.stdout)
    assert [(s["serial_number"], s["owner"], s["next_fire_at"]) for s in listed] == [
        ("PLUG2", BOB, "2026-11-23 06:30:00"),
        ("PLUG1", ANA, "2026-11-23 07:00:00"),
        ("PLUG1", ANA, None),  # inactive: last
    ]
    assert listed[1]["next_local"] == "Mon 09:00" and listed[1]["time_zone"] == "Europe/Sofia"
    assert listed[0]["next_command"] == "switch_on_off" and listed[2]["active"] is False
    mine = await cli("schedules", "list", "--owner", BOB, "--format", "csv",
                     database_url=database_url)  # fmt: skip
    assert_succeeded(mine)
    assert mine.stdout.splitlines()[0].startswith("next_fire_at,next_local,next_command,serial")
    assert len(mine.stdout.splitlines()) == 2
    table = await cli("schedules", "list", "--serial", "PLUG1", "--limit", "1",
                      database_url=database_url)  # fmt: skip
    assert_succeeded(table)
    assert "next (UTC)" in table.stdout and "Europe/Sofia" in table.stdout
    assert "1 of 2 schedules shown" in table.stdout


async def test_a_bad_filter_fails_in_one_line(database_url):
    assert_one_line_error(await cli("schedules", "list", "--owner", "nobody@example.com",
                                    database_url=database_url), "no account")  # fmt: skip
    assert_one_line_error(await cli("schedules", "list", "--serial", "a/b",
                                    database_url=database_url), "serial")  # fmt: skip
