"""`devicecontrol controllers import FILE.csv [--skip-invalid]`."""

from __future__ import annotations

import pytest

from devicecontrol.controllers.identity import claim_code_digest
from devicecontrol.database.tables import controller_assignments, controllers
from devicecontrol.devices.identity import device_secret_digest
from tests.cli.support import (
    assert_one_line_error,
    assert_succeeded,
    cli,
    connects,
    reported_lines,
    rows,
    snapshot,
)
from tests.conftest import SQLITE_ENOUGH
from tests.factories import logged_in_user, make_controller, make_user

pytestmark = SQLITE_ENOUGH

FULL = """\
owner,serial_number,type,mac,name,firmware_version,brand_id,device_group,room_id,claim_code,online
ANA@example.com,IMP-1,melissa,a0:b1:c2:d3:e4:01,Living room,1.4.2,7,climate,3,CODE-1,true
,IMP-2,smart_plug,a0b1c2d3e402,,,,,,,
"""

# line 1 is the header, line 6 is blank; the bad rows are on lines 3, 4, 7-11 and 13
MIXED = """\
serial_number,mac,type,owner,brand_id
GOOD-1,AABBCCDDEE01,smart_plug,,
BAD SERIAL,AABBCCDDEE02,smart_plug,,
BAD-MAC,AABBCCDDEE,smart_plug,,
GOOD-2,AABBCCDDEE04,melissa,ana@example.com,

NO-TYPE,AABBCCDDEE06,,,
GOOD-1,AABBCCDDEE01,smart_plug,,
NO-OWNER,AABBCCDDEE08,smart_plug,nobody@example.com,
BAD-BRAND,AABBCCDDEE09,smart_plug,,abc
TAKEN,AABBCCDDEEFF,smart_plug,,
GOOD-3,AABBCCDDEE11,vicki,,2
TOO-MANY,AABBCCDDEE12,smart_plug,,,extra
TAKEN-2,AABBCCDDEE00,smart_plug,,
"""
MIXED_BAD_LINES = [3, 4, 7, 8, 9, 10, 11, 13]
MIXED_GOOD = ["GOOD-1", "GOOD-2", "GOOD-3"]


def write_csv(tmp_path, text: str, name: str = "controllers.csv") -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


async def test_controllers_import_registers_every_column_whatever_their_order(
    database_url, runtime, tmp_path
):
    ana = await make_user(runtime, "ana@example.com")
    result = await cli(
        "controllers", "import", write_csv(tmp_path, FULL), database_url=database_url
    )
    assert_succeeded(result)
    assert "added 2" in result.stdout
    one, two = sorted(await rows(runtime, controllers), key=lambda row: row.serial_number)
    assert (one.serial_number, one.mac, one.type, one.name) == (
        "IMP-1", "A0B1C2D3E401", "melissa", "Living room",
    )  # fmt: skip
    assert (one.firmware_version, one.brand_id, one.device_group, one.room_id) == (
        "1.4.2", 7, "climate", 3,
    )  # fmt: skip
    assert (one.user_id, one.online) == (ana, True)
    assert one.claim_code_digest == claim_code_digest("IMP-1", "CODE-1")
    assert (two.serial_number, two.mac, two.type) == ("IMP-2", "A0B1C2D3E402", "smart_plug")
    assert (two.user_id, two.online, two.brand_id, two.room_id) == (None, False, 1, None)
    [record] = await rows(runtime, controller_assignments)
    assert (record.controller_id, record.user_id, record.room_id) == (one.id, ana, 3)


async def test_a_files_controllers_are_registered_in_file_order(
    database_url, runtime, client, tmp_path
):
    _, headers = await logged_in_user(runtime, client, "ana@example.com")
    text = (
        "serial_number,mac,type,owner\n"
        "ORDER-A,AABBCCDDEE01,smart_plug,\n"
        "ORDER-B,AABBCCDDEE02,smart_plug,ana@example.com\n"
        "ORDER-C,AABBCCDDEE03,smart_plug,\n"
    )
    path = write_csv(tmp_path, text)
    assert_succeeded(await cli("controllers", "import", path, database_url=database_url))
    for serial in ("ORDER-C", "ORDER-A"):
        claimed = await client.post(f"/v1/controllers/{serial}/assign", headers=headers)
        assert claimed.status_code == 200, claimed.text
    listed = (await client.get("/v1/controllers", headers=headers)).json()
    serials = [c["serial_number"] for c in listed["_embedded"]["controller"]]
    assert serials == ["ORDER-A", "ORDER-B", "ORDER-C"]


async def test_a_rerun_of_the_same_file_adds_nothing_and_succeeds(database_url, runtime, tmp_path):
    await make_user(runtime, "ana@example.com")
    path = write_csv(tmp_path, FULL)
    assert_succeeded(await cli("controllers", "import", path, database_url=database_url))
    before = await snapshot(runtime)
    again = await cli("controllers", "import", path, database_url=database_url)
    assert_succeeded(again)
    assert "added 0" in again.stdout
    assert "already registered 2" in again.stdout
    assert await snapshot(runtime) == before


async def test_without_skip_invalid_one_bad_row_stops_the_whole_file_and_each_is_reported(
    database_url, runtime, tmp_path
):
    await make_user(runtime, "ana@example.com")
    await make_controller(runtime, "TAKEN", mac="AABBCCDDEE10")
    await make_controller(runtime, "TAKEN-2", mac="AABBCCDDEE00")
    before = await snapshot(runtime)
    result = await cli(
        "controllers", "import", write_csv(tmp_path, MIXED), database_url=database_url
    )
    assert result.returncode == 1
    assert result.stdout == ""
    assert reported_lines(result.stderr) == MIXED_BAD_LINES
    last = result.stderr.splitlines()[-1]
    assert last.startswith("Error: ") and "nothing was imported" in last
    assert len(result.stderr.splitlines()) == len(MIXED_BAD_LINES) + 1
    assert await snapshot(runtime) == before


async def test_with_skip_invalid_the_good_rows_land_and_the_bad_ones_are_reported(
    database_url, runtime, tmp_path
):
    ana = await make_user(runtime, "ana@example.com")
    await make_controller(runtime, "TAKEN", mac="AABBCCDDEE10")
    await make_controller(runtime, "TAKEN-2", mac="AABBCCDDEE00")
    result = await cli(
        "controllers", "import", write_csv(tmp_path, MIXED), "--skip-invalid",
        database_url=database_url,
    )  # fmt: skip
    assert_succeeded(result)
    assert reported_lines(result.stderr) == MIXED_BAD_LINES
    assert "added 3" in result.stdout
    assert "already registered 1" in result.stdout
    registered = {row.serial_number: row for row in await rows(runtime, controllers)}
    assert set(registered) == {"TAKEN", "TAKEN-2", *MIXED_GOOD}
    assert registered["GOOD-2"].user_id == ana
    assert registered["GOOD-3"].brand_id == 2
    assert registered["TAKEN"].mac == "AABBCCDDEE10"
    [record] = await rows(runtime, controller_assignments)
    assert (record.serial_number, record.user_id) == ("GOOD-2", ana)


REG_1_SECRET = "reg-1-device-secret-0123"
REGISTERED = f"REG-1,AABBCCDDEE01,melissa,,ana@example.com,THE-CODE,{REG_1_SECRET}"


async def register_reg_1(runtime):
    await make_user(runtime, "ana@example.com")
    await make_user(runtime, "ben@example.com")
    await make_controller(runtime, "REG-1", mac="AABBCCDDEE01", type="melissa",
                          owner="ana@example.com", claim_code="THE-CODE",
                          device_secret=REG_1_SECRET)  # fmt: skip


def reg_1_file(tmp_path, row: str) -> str:
    header = "serial_number,mac,type,name,owner,claim_code,device_secret"
    return write_csv(tmp_path, f"{header}\n{row}\n")


@pytest.mark.parametrize(
    "row",
    [
        REGISTERED,
        "REG-1,aa:bb:cc:dd:ee:01,melissa,,,THE-CODE",
        REGISTERED.replace("THE-CODE", ""),
        REGISTERED.replace(REG_1_SECRET, ""),
    ],
    ids=[
        "same values",
        "same values, other MAC spelling, owner left out",
        "claim code left out (as in an export): the stored one is kept",
        "device secret left out (as in an export): the stored one is kept",
    ],
)
async def test_a_serial_registered_with_the_same_values_is_skipped(
    row, database_url, runtime, tmp_path
):
    await register_reg_1(runtime)
    before = await snapshot(runtime)
    result = await cli(
        "controllers", "import", reg_1_file(tmp_path, row), database_url=database_url
    )
    assert_succeeded(result)
    assert "already registered 1" in result.stdout
    assert await snapshot(runtime) == before


@pytest.mark.parametrize(
    "row",
    [
        REGISTERED.replace("AABBCCDDEE01", "AABBCCDDEE99"),
        REGISTERED.replace("melissa", "bobbie"),
        REGISTERED.replace("melissa,,", "melissa,Other name,"),
        REGISTERED.replace("ana@", "ben@"),
        REGISTERED.replace("THE-CODE", "ANOTHER-CODE"),
        REGISTERED.replace(REG_1_SECRET, "another-device-secret-0123"),
    ],
    ids=["mac", "type", "name", "owner", "claim code", "device secret"],
)
async def test_a_serial_registered_with_different_values_is_a_bad_row(
    row, database_url, runtime, tmp_path
):
    await register_reg_1(runtime)
    before = await snapshot(runtime)
    path = reg_1_file(tmp_path, row)
    result = await cli("controllers", "import", path, database_url=database_url)
    assert result.returncode == 1
    assert reported_lines(result.stderr) == [2]
    assert "REG-1" in result.stderr
    assert "another-device-secret" not in result.stderr  # the field is named, never the value
    skipped = await cli("controllers", "import", path, "--skip-invalid", database_url=database_url)
    assert_succeeded(skipped)
    assert reported_lines(skipped.stderr) == [2]
    assert await snapshot(runtime) == before


WITH_SECRETS = """\
serial_number,mac,type,device_secret
SEC-1,AABBCCDDEE01,smart_plug,sec-1-device-secret-0123
SEC-2,AABBCCDDEE02,smart_plug,
SEC-3,AABBCCDDEE03,melissa,sec-3-device-secret-0123
"""


async def test_an_import_stores_each_device_secret_as_a_digest_and_counts_rows_without_one(
    database_url, runtime, tmp_path
):
    result = await cli(
        "controllers", "import", write_csv(tmp_path, WITH_SECRETS), database_url=database_url
    )
    assert_succeeded(result)
    assert result.stdout == (
        "added 3, already registered 0, skipped 0 bad row(s); 1 added without a device secret "
        "(they cannot connect until controllers rotate-secret gives them one)\n"
    )
    assert result.stderr == ""
    digests = {
        row.serial_number: row.device_secret_digest for row in await rows(runtime, controllers)
    }
    assert digests == {
        "SEC-1": device_secret_digest("sec-1-device-secret-0123"),
        "SEC-2": None,
        "SEC-3": device_secret_digest("sec-3-device-secret-0123"),
    }
    assert "device-secret-0123" not in repr(await snapshot(runtime))
    assert await connects(runtime, "SEC-1", "sec-1-device-secret-0123")
    assert not await connects(runtime, "SEC-1", "sec-3-device-secret-0123")
    assert not await connects(runtime, "SEC-2", "")


async def test_an_import_without_the_device_secret_column_registers_devices_without_one(
    database_url, runtime, tmp_path
):
    text = "serial_number,mac,type\nNOSEC-1,AABBCCDDEE01,smart_plug\nNOSEC-2,AABBCCDDEE02,vicki\n"
    result = await cli(
        "controllers", "import", write_csv(tmp_path, text), database_url=database_url
    )
    assert_succeeded(result)
    assert "added 2, already registered 0, skipped 0 bad row(s); 2 added without a device" in (
        result.stdout
    )
    assert [row.device_secret_digest for row in await rows(runtime, controllers)] == [None, None]


async def test_a_rerun_of_a_file_with_device_secrets_changes_nothing(
    database_url, runtime, tmp_path
):
    path = write_csv(tmp_path, WITH_SECRETS)
    assert_succeeded(await cli("controllers", "import", path, database_url=database_url))
    before = await snapshot(runtime)
    again = await cli("controllers", "import", path, database_url=database_url)
    assert_succeeded(again)
    assert again.stdout == "added 0, already registered 3, skipped 0 bad row(s)\n"
    assert await snapshot(runtime) == before


async def test_a_device_secret_stated_for_a_registered_controller_without_one_is_a_bad_row(
    database_url, runtime, tmp_path
):
    """An import never changes a registered controller: rotate-secret gives it a secret."""
    await make_controller(runtime, "BARE-1", mac="AABBCCDDEE01")
    before = await snapshot(runtime)
    text = (
        "serial_number,mac,type,device_secret\nBARE-1,AABBCCDDEE01,smart_plug,new-secret-0123456\n"
    )
    result = await cli("controllers", "import", write_csv(tmp_path, text), "--skip-invalid",
                       database_url=database_url)  # fmt: skip
    assert_succeeded(result)
    assert reported_lines(result.stderr) == [2]
    assert "(device_secret)" in result.stderr
    assert await snapshot(runtime) == before


async def test_an_import_refuses_a_device_secret_with_white_space_around_it(
    database_url, runtime, tmp_path
):
    text = (
        "serial_number,mac,type,device_secret\n"
        "PAD-1,AABBCCDDEE01,smart_plug, padded-secret-0123\n"
        "PAD-2,AABBCCDDEE02,smart_plug,   \n"  # blank: not stated, like any empty cell
    )
    result = await cli("controllers", "import", write_csv(tmp_path, text), "--skip-invalid",
                       database_url=database_url)  # fmt: skip
    assert_succeeded(result)
    assert reported_lines(result.stderr) == [2]
    assert "device_secret: must not start or end with white space" in result.stderr
    [added] = await rows(runtime, controllers)
    assert (added.serial_number, added.device_secret_digest) == ("PAD-2", None)


async def test_an_import_warns_of_short_device_secrets_in_one_line(database_url, runtime, tmp_path):
    text = (
        "serial_number,mac,type,device_secret\n"
        "SHORT-1,AABBCCDDEE01,smart_plug,tiny\n"
        "LONG-1,AABBCCDDEE02,smart_plug,long-enough-secret-0123\n"
    )
    result = await cli(
        "controllers", "import", write_csv(tmp_path, text), database_url=database_url
    )
    assert_succeeded(result)
    [warning] = result.stderr.splitlines()
    assert warning.startswith("Warning: 1 added controller(s)")
    assert "shorter than 16 characters" in warning and "tiny" not in warning
    assert await connects(runtime, "SHORT-1", "tiny")


@pytest.mark.parametrize("missing", ["serial_number", "mac", "type"])
async def test_a_file_without_a_required_column_fails_in_one_line_and_writes_nothing(
    missing, database_url, runtime, tmp_path
):
    columns = [c for c in ("serial_number", "mac", "type", "name") if c != missing]
    values = {"serial_number": "SN1", "mac": "AABBCCDDEE01", "type": "melissa", "name": "N"}
    text = ",".join(columns) + "\n" + ",".join(values[c] for c in columns) + "\n"
    before = await snapshot(runtime)
    for flags in ([], ["--skip-invalid"]):
        result = await cli(
            "controllers", "import", write_csv(tmp_path, text), *flags, database_url=database_url
        )
        assert_one_line_error(result, f"missing column(s): {missing}")
    assert await snapshot(runtime) == before


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (None, "cannot read"),
        (b"", "missing column"),
        (b"serial_number,mac,type,colour\nSN1,AABBCCDDEE01,melissa,red\n", "unknown column"),
        (b"serial_number,mac,type,name\nSN1,AABBCCDDEE01,melissa,Caf\xe9\n", "UTF-8"),
    ],
    ids=["no such file", "empty file", "unknown column", "not utf-8"],
)
async def test_an_unreadable_file_fails_in_one_line_and_writes_nothing(
    content, fragment, database_url, runtime, tmp_path
):
    path = tmp_path / "controllers.csv"
    if content is not None:
        path.write_bytes(content)
    before = await snapshot(runtime)
    result = await cli("controllers", "import", str(path), database_url=database_url)
    assert_one_line_error(result, fragment)
    assert await snapshot(runtime) == before


@pytest.mark.parametrize(
    "column", ["name", "type", "firmware_version", "owner", "claim_code", "device_secret"]
)
async def test_a_nul_character_in_any_field_is_a_bad_row_on_both_databases(
    column, database_url, runtime, tmp_path
):
    await make_user(runtime, "ana@example.com")
    values = {
        "serial_number": "NUL-1",
        "mac": "AABBCCDDEE01",
        "type": "melissa",
        "name": "N",
        "firmware_version": "1.0",
        "owner": "ana@example.com",
        "claim_code": "CODE",
        "device_secret": "device-secret-0123",
    }
    values[column] = values[column][:1] + "\x00" + values[column][1:]
    path = write_csv(tmp_path, ",".join(values) + "\n" + ",".join(values.values()) + "\n")
    before = await snapshot(runtime)
    result = await cli("controllers", "import", path, "--skip-invalid", database_url=database_url)
    assert_succeeded(result)
    assert reported_lines(result.stderr) == [2]
    assert f"{column}: must not contain NUL" in result.stderr
    assert await snapshot(runtime) == before


async def test_a_utf8_file_with_a_byte_order_mark_is_read(database_url, runtime, tmp_path):
    path = tmp_path / "excel.csv"
    path.write_text("serial_number,mac,type,name\nSN1,AABBCCDDEE01,melissa,Café\n", "utf-8-sig")
    assert_succeeded(await cli("controllers", "import", str(path), database_url=database_url))
    assert [(r.serial_number, r.name) for r in await rows(runtime, controllers)] == [
        ("SN1", "Café")
    ]
