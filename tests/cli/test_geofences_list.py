"""`devicecontrol geofences list [--owner EMAIL] [--serial SN] [--limit N] [--format]`:
every account's geofences, oldest first."""

from __future__ import annotations

import json

import pytest

from devicecontrol.automations.geofences import service as geofences
from devicecontrol.runtime import Runtime
from tests.cli.support import assert_one_line_error, assert_succeeded, cli
from tests.devices.helpers import ANA, BOB
from tests.factories import make_controller, make_user

PLUG_FENCE = {
    "controller_id": "PLUG1", "latitude": 42.6977, "longitude": 23.3219, "radius": 200,
    "enter_command_name": "switch_on_off", "enter_command_fields": {"state": "on"},
    "exit_command_name": "switch_on_off", "exit_command_fields": {"state": "off"},
}  # fmt: skip


async def make_fences(runtime: Runtime) -> None:
    """Ana's two on PLUG1 (the first with the phone inside, the second inactive), then
    Bob's one on PLUG2."""
    ana = await make_user(runtime, ANA)
    bob = await make_user(runtime, BOB)
    await make_controller(runtime, "PLUG1", owner=ANA, type="smart_plug")
    await make_controller(runtime, "PLUG2", owner=BOB, type="smart_plug")
    first = await geofences.create_geofence(runtime, ana, PLUG_FENCE)
    await geofences.cross(runtime, first, entering=True)
    await geofences.create_geofence(runtime, ana, {**PLUG_FENCE, "radius": 5000, "active": 0})
    await geofences.create_geofence(
        runtime, bob, {**PLUG_FENCE, "controller_id": "PLUG2", "enter_push": 1}
    )


async def test_geofences_are_listed_oldest_first_with_owner_and_state(database_url, runtime):
    await make_fences(runtime)
    result = await cli("geofences", "list", "--format", "json", database_url=database_url)
    assert_succeeded(result)
    listed = json.loads(result.stdout)
    assert [(g["serial_number"], g["owner"], g["radius"]) for g in listed] == [
        ("PLUG1", ANA, 200),
        ("PLUG1", ANA, 5000),
        ("PLUG2", BOB, 200),
    ]
    assert [g["id"] for g in listed] == sorted(g["id"] for g in listed)
    first = listed[0]
    assert (first["latitude"], first["longitude"]) == (42.6977, 23.3219)
    assert first["enter_command_name"] == "switch_on_off"
    assert json.loads(first["enter_command_fields"]) == {"state": "on"}  # as the API shows it
    assert [g["inside"] for g in listed] == [True, None, None]  # None: no report yet
    assert [g["active"] for g in listed] == [True, False, True]
    assert [g["enter_push"] for g in listed] == [False, False, True]
    assert len(first["created_at"]) == len("2026-01-01 00:00:00")
    mine = await cli("geofences", "list", "--owner", BOB, "--format", "csv",
                     database_url=database_url)  # fmt: skip
    assert_succeeded(mine)
    assert mine.stdout.splitlines()[0].startswith("id,serial_number,owner,latitude,longitude")
    assert len(mine.stdout.splitlines()) == 2 and ",PLUG2,bob@example.com," in mine.stdout
    table = await cli("geofences", "list", "--serial", "PLUG1", "--limit", "1",
                      database_url=database_url)  # fmt: skip
    assert_succeeded(table)
    assert "radius (m)" in table.stdout and "phone inside" in table.stdout
    assert "5000" not in table.stdout  # the second of PLUG1's is beyond the limit
    assert table.stdout.splitlines()[-1] == (
        "1 of 2 geofences shown; 1 more: raise --limit or narrow the filters"
    )


async def test_the_limit_note_goes_to_stderr_for_scripts(database_url, runtime):
    await make_fences(runtime)
    for output_format in ("csv", "json"):
        result = await cli("geofences", "list", "--limit", "2", "--format", output_format,
                           database_url=database_url)  # fmt: skip
        assert_succeeded(result)
        assert "shown" not in result.stdout  # stdout stays parseable
        assert result.stderr.strip() == (
            "2 of 3 geofences shown; 1 more: raise --limit or narrow the filters"
        )
    as_json = await cli("geofences", "list", "--limit", "2", "--format", "json",
                        database_url=database_url)  # fmt: skip
    assert len(json.loads(as_json.stdout)) == 2
    everything = await cli("geofences", "list", "--limit", "3", database_url=database_url)
    assert_succeeded(everything)
    assert "more" not in everything.stdout and everything.stderr == ""


async def test_no_match_says_so_in_every_format(database_url, runtime):
    await make_user(runtime, ANA)  # an account with no geofences: no match, not an error
    for args in ([], ["--owner", ANA], ["--serial", "PLUG9"]):
        table = await cli("geofences", "list", *args, database_url=database_url)
        assert_succeeded(table)
        assert table.stdout == "no geofences match\n"
    as_csv = await cli("geofences", "list", "--format", "csv", database_url=database_url)
    assert_succeeded(as_csv)
    assert as_csv.stdout.splitlines() == [
        "id,serial_number,owner,latitude,longitude,radius,enter_command_name,"
        "enter_command_fields,exit_command_name,exit_command_fields,active,enter_push,"
        "exit_push,inside,created_at"
    ]
    as_json = await cli("geofences", "list", "--format", "json", database_url=database_url)
    assert_succeeded(as_json)
    assert json.loads(as_json.stdout) == [] and as_json.stderr == ""


BAD_INPUT = {
    "unknown owner": (["--owner", "nobody@example.com"], "no account"),
    "owner not an e-mail": (["--owner", "ana"], "owner: must be an e-mail address"),
    "serial with a slash": (["--serial", "a/b"], "serial"),
    "empty serial": (["--serial", ""], "serial"),
    "serial too long": (["--serial", "S" * 65], "serial"),
    "limit zero": (["--limit", "0"], "--limit"),
    "limit not a number": (["--limit", "many"], "--limit"),
    "limit too large": (["--limit", "10001"], "--limit"),
    "unknown format": (["--format", "xml"], "--format"),
}


@pytest.mark.parametrize(("args", "fragment"), BAD_INPUT.values(), ids=BAD_INPUT.keys())
async def test_bad_input_fails_in_one_line(args, fragment, database_url, runtime):
    await make_user(runtime, ANA)
    result = await cli("geofences", "list", *args, database_url=database_url)
    assert_one_line_error(result, fragment)
