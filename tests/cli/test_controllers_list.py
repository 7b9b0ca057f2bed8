"""`devicecontrol controllers list [filters] [--limit N] [--format table|csv|json]`."""

from __future__ import annotations

import json

import pytest

from devicecontrol.database.tables import controllers
from devicecontrol.users.service import disable_user
from tests.cli.support import assert_one_line_error, assert_succeeded, cli, csv_column, rows
from tests.factories import make_controller, make_user

# serial: (type, owner, online); registered in this order
FLEET = {
    "A-1": ("melissa", "ana@example.com", True),
    "A-2": ("smart_plug", "ana@example.com", False),
    "B-1": ("melissa", "ben@example.com", False),
    "U-1": ("smart_plug", None, True),
    "U-2": ("vicki", None, False),
    "a-1": ("smart_plug", None, False),  # a prefix filter is case-sensitive
    "X_1": ("smart_plug", None, False),  # "_" in a prefix is literal, not a wildcard
    "XA1": ("smart_plug", None, False),
}


async def register_fleet(runtime) -> None:
    await make_user(runtime, "ana@example.com")
    await make_user(runtime, "Ben@Example.com")
    for index, (serial, (type_, owner, online)) in enumerate(FLEET.items()):
        code = "C" if index else None  # A-1 alone has no claim code
        await make_controller(runtime, serial, mac=f"AABBCCDDEE{index:02X}", type=type_,
                              owner=owner, online=online, claim_code=code)  # fmt: skip


FILTERS = {
    "no filter": ([], list(FLEET)),
    "owner": (["--owner", "ana@example.com"], ["A-1", "A-2"]),
    "owner in another case": (["--owner", "BEN@example.COM"], ["B-1"]),
    "unowned": (["--unowned"], ["U-1", "U-2", "a-1", "X_1", "XA1"]),
    "type": (["--type", "melissa"], ["A-1", "B-1"]),
    "serial prefix": (["--serial-prefix", "A-"], ["A-1", "A-2"]),
    "serial prefix with _": (["--serial-prefix", "X_"], ["X_1"]),
    "online": (["--online"], ["A-1", "U-1"]),
    "offline": (["--offline"], ["A-2", "B-1", "U-2", "a-1", "X_1", "XA1"]),
    "filters combine": (["--owner", "ana@example.com", "--type", "melissa", "--online"], ["A-1"]),
    "nothing matches": (["--type", "bobbie"], []),
}


@pytest.mark.parametrize(("args", "expected"), FILTERS.values(), ids=FILTERS.keys())
async def test_each_filter_narrows_the_list_in_registration_order(
    args, expected, database_url, runtime
):
    await register_fleet(runtime)
    result = await cli("controllers", "list", *args, "--format", "csv", database_url=database_url)
    assert csv_column(result, "serial_number") == expected
    assert result.stderr == ""


async def test_the_table_shows_each_controllers_useful_columns_and_never_a_digest(
    database_url, runtime
):
    await register_fleet(runtime)
    result = await cli("controllers", "list", "--owner", "ana@example.com",
                       database_url=database_url)  # fmt: skip
    assert_succeeded(result)
    lines = result.stdout.splitlines()
    header = next(line for line in lines if "serial" in line)
    for title in ("MAC", "type", "owner", "online", "claim code", "registered (UTC)"):
        assert title in header
    [a_1] = [line for line in lines if " A-1 " in line]
    for value in ("AABBCCDDEE00", "melissa", "ana@example.com", "yes", "no"):
        assert value in a_1  # online yes, claim code no
    [a_2] = [line for line in lines if " A-2 " in line]
    assert "smart_plug" in a_2
    assert "B-1" not in result.stdout
    digests = [row.claim_code_digest for row in await rows(runtime, controllers)]
    assert not any(digest in result.stdout for digest in digests if digest)


async def test_a_disabled_owners_controllers_are_still_listed_by_owner(database_url, runtime):
    await register_fleet(runtime)
    await disable_user(runtime, "ben@example.com")
    result = await cli("controllers", "list", "--owner", "ben@example.com", "--format", "csv",
                       database_url=database_url)  # fmt: skip
    assert csv_column(result, "serial_number") == ["B-1"]


async def test_limit_shows_the_first_rows_and_says_how_many_more_match(database_url, runtime):
    await register_fleet(runtime)
    table = await cli("controllers", "list", "--limit", "3", database_url=database_url)
    assert_succeeded(table)
    shown = [serial for serial in FLEET if f" {serial} " in table.stdout]
    assert shown == ["A-1", "A-2", "B-1"]
    assert table.stdout.splitlines()[-1] == (
        "3 of 8 controllers shown; 5 more: raise --limit or narrow the filters"
    )
    as_csv = await cli("controllers", "list", "--limit", "3", "--format", "csv",
                       database_url=database_url)  # fmt: skip
    assert csv_column(as_csv, "serial_number") == ["A-1", "A-2", "B-1"]
    assert as_csv.stderr.strip() == table.stdout.splitlines()[-1]  # scripts parse stdout
    everything = await cli("controllers", "list", "--limit", "8", database_url=database_url)
    assert "more" not in everything.stdout


async def test_json_output_carries_typed_values(database_url, runtime):
    await register_fleet(runtime)
    result = await cli("controllers", "list", "--serial-prefix", "A-1", "--format", "json",
                       database_url=database_url)  # fmt: skip
    assert_succeeded(result)
    [a_1] = json.loads(result.stdout)
    assert {k: a_1[k] for k in ("serial_number", "mac", "online", "owner", "has_claim_code")} == {
        "serial_number": "A-1", "mac": "AABBCCDDEE00", "online": True,
        "owner": "ana@example.com", "has_claim_code": False,
    }  # fmt: skip
    assert a_1["brand_id"] == 1 and a_1["room_id"] is None
    assert len(a_1["created_at"]) == len("2026-01-01 00:00:00")


async def test_an_empty_registry_says_so(database_url):
    result = await cli("controllers", "list", database_url=database_url)
    assert_succeeded(result)
    assert result.stdout == "no controllers match\n"


BAD_FILTERS = {
    "unknown owner": (["--owner", "nobody@example.com"], "no account is named"),
    "owner not an e-mail": (["--owner", "ana"], "owner: must be an e-mail address"),
    "owner and unowned": (["--owner", "ana@example.com", "--unowned"], "exclude each other"),
    "prefix with a space": (["--serial-prefix", "A 1"], "serial_prefix"),
    "prefix with %": (["--serial-prefix", "A%"], "serial_prefix"),
    "empty prefix": (["--serial-prefix", ""], "serial_prefix"),
    "empty type": (["--type", " "], "type"),
    "type too long": (["--type", "t" * 65], "type"),
    "limit zero": (["--limit", "0"], "--limit"),
    "limit not a number": (["--limit", "many"], "--limit"),
    "limit too large": (["--limit", "10001"], "--limit"),
    "unknown format": (["--format", "xml"], "--format"),
}


@pytest.mark.parametrize(("args", "fragment"), BAD_FILTERS.values(), ids=BAD_FILTERS.keys())
async def test_a_bad_filter_value_fails_in_one_line(args, fragment, database_url, runtime):
    await make_user(runtime, "ana@example.com")
    result = await cli("controllers", "list", *args, database_url=database_url)
    assert_one_line_error(result, fragment)
