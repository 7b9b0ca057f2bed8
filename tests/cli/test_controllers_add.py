"""`devicecontrol controllers add SERIAL --mac MAC --type TYPE [...]`."""

from __future__ import annotations

import pytest

from devicecontrol.controllers.identity import claim_code_digest
from devicecontrol.database.tables import controller_assignments, controllers
from devicecontrol.devices.identity import device_secret_digest
from devicecontrol.users.service import disable_user
from tests.cli.support import (
    assert_one_line_error,
    assert_succeeded,
    cli,
    connects,
    rows,
    snapshot,
)
from tests.conftest import SQLITE_ENOUGH
from tests.factories import logged_in_user, make_controller, make_user

pytestmark = SQLITE_ENOUGH


async def test_controllers_add_stores_every_option_and_the_owners_assignment_record(
    database_url, runtime, client
):
    user_id, headers = await logged_in_user(runtime, client, "ana@example.com")
    result = await cli(
        "controllers", "add", "Melissa_01-x", "--mac", "a0:b1:c2:d3:e4:f5", "--type", "melissa",
        "--name", "Living room", "--firmware", "1.4.2", "--brand-id", "7", "--device-group",
        "climate", "--room-id", "3", "--claim-code", "7F3K-92QD", "--owner", "ANA@example.com",
        "--online", database_url=database_url,
    )  # fmt: skip
    assert_succeeded(result)
    [row] = await rows(runtime, controllers)
    assert row.serial_number == "Melissa_01-x"
    assert row.mac == "A0B1C2D3E4F5"
    assert (row.type, row.name, row.firmware_version) == ("melissa", "Living room", "1.4.2")
    assert (row.brand_id, row.device_group, row.room_id) == (7, "climate", 3)
    assert row.online is True
    assert row.user_id == user_id
    assert row.claim_code_digest == claim_code_digest("Melissa_01-x", "7F3K-92QD")
    assert "7F3K-92QD" not in repr(await snapshot(runtime))
    [record] = await rows(runtime, controller_assignments)
    assert (record.controller_id, record.user_id, record.deleted_at) == (row.id, user_id, None)
    assert (record.serial_number, record.mac, record.type) == (
        row.serial_number,
        row.mac,
        "melissa",
    )
    assert (record.name, record.firmware_version, record.device_group) == (
        "Living room", "1.4.2", "climate",
    )  # fmt: skip
    assert (record.room_id, record.status_push) == (3, 0)
    response = await client.get("/v1/controllers/Melissa_01-x", headers=headers)
    assert response.status_code == 200
    assert response.json()["controller"]["mac"] == "A0B1C2D3E4F5"


async def test_controllers_add_with_only_the_required_options_is_unowned_and_offline(
    database_url, runtime
):
    result = await cli(
        "controllers", "add", "PLUG1", "--mac", "aabb.ccdd.eeff.0011", "--type", "smart_plug",
        database_url=database_url,
    )  # fmt: skip
    assert_succeeded(result)
    [row] = await rows(runtime, controllers)
    assert row.mac == "AABBCCDDEEFF0011"
    assert (row.user_id, row.online, row.brand_id, row.room_id) == (None, False, 1, None)
    assert (row.name, row.firmware_version, row.device_group) == ("", "", "")
    assert row.claim_code_digest is None
    assert row.device_secret_digest is not None  # generated: every added device can connect
    assert await rows(runtime, controller_assignments) == []


@pytest.mark.parametrize("mac", ["AA-BB-CC-DD-EE-FF", "aabbccddeeff", "AaBb.CcDd.EeFf"])
async def test_controllers_add_normalises_the_mac_to_uppercase_hex(mac, database_url, runtime):
    result = await cli(
        "controllers", "add", "SN1", "--mac", mac, "--type", "vicki", database_url=database_url
    )
    assert_succeeded(result)
    assert [row.mac for row in await rows(runtime, controllers)] == ["AABBCCDDEEFF"]


def printed_secret(stdout: str) -> str:
    [line] = [line for line in stdout.splitlines() if line.startswith("device_secret: ")]
    return line.removeprefix("device_secret: ")


async def test_controllers_add_with_a_device_secret_stores_only_its_digest(database_url, runtime):
    secret = "plug-1-device-secret-0123"
    result = await cli(
        "controllers", "add", "PLUG1", "--mac", "AABBCCDDEEFF", "--type", "smart_plug",
        "--device-secret", secret, database_url=database_url,
    )  # fmt: skip
    assert_succeeded(result)
    assert result.stderr == ""
    assert secret not in result.stdout  # the operator chose it: nothing to show
    assert "device_secret" not in result.stdout
    [row] = await rows(runtime, controllers)
    assert row.device_secret_digest == device_secret_digest(secret)
    assert secret not in repr(await snapshot(runtime))
    assert await connects(runtime, "PLUG1", secret)
    assert not await connects(runtime, "PLUG1", secret + "x")


async def test_controllers_add_without_a_device_secret_generates_one_and_prints_it_once(
    database_url, runtime
):
    outputs = []
    for serial, mac in (("MEL1", "AABBCCDDEE01"), ("MEL2", "AABBCCDDEE02")):
        result = await cli(
            "controllers", "add", serial, "--mac", mac, "--type", "melissa",
            database_url=database_url,
        )  # fmt: skip
        assert_succeeded(result)
        assert result.stderr == ""
        assert "cannot be shown again" in result.stdout
        outputs.append(result.stdout)
    first, second = (printed_secret(stdout) for stdout in outputs)
    assert len(first) >= 32 and first != second
    assert outputs[0].count(first) == 1  # printed once, on its own line
    one, two = await rows(runtime, controllers)
    assert one.device_secret_digest == device_secret_digest(first)
    assert two.device_secret_digest == device_secret_digest(second)
    stored = repr(await snapshot(runtime))
    assert first not in stored and second not in stored
    assert await connects(runtime, "MEL1", first)
    assert not await connects(runtime, "MEL1", second)  # each device has its own
    assert not await connects(runtime, "MEL2", "")


async def test_controllers_add_warns_in_one_line_of_a_short_device_secret_and_keeps_it(
    database_url, runtime
):
    result = await cli(
        "controllers", "add", "PLUG1", "--mac", "AABBCCDDEEFF", "--type", "smart_plug",
        "--device-secret", "short-secret", database_url=database_url,
    )  # fmt: skip
    assert_succeeded(result)
    [warning] = result.stderr.splitlines()
    assert warning.startswith("Warning: ") and "shorter than 16 characters" in warning
    assert "short-secret" not in warning
    assert await connects(runtime, "PLUG1", "short-secret")


async def test_controllers_add_help_says_online_is_only_the_initial_value(database_url):
    result = await cli("controllers", "add", "--help")
    assert_succeeded(result)
    text = " ".join(result.stdout.split())
    assert "--device-secret" in text
    assert "Initial connectivity flag only" in text and "device link sets it" in text


BAD_INPUTS = {
    "malformed mac": (["NEW1", "--mac", "aa:bb:cc:dd:ee", "--type", "melissa"], "mac"),
    "mac with non-hex": (["NEW1", "--mac", "GGBBCCDDEEFF", "--type", "melissa"], "mac"),
    "mac of 14 digits": (["NEW1", "--mac", "AABBCCDDEEFF00", "--type", "melissa"], "mac"),
    "duplicate serial": (["TAKEN", "--mac", "AABBCCDDEE01", "--type", "melissa"], "TAKEN"),
    "serial with a space": (["NEW 1", "--mac", "AABBCCDDEE01", "--type", "melissa"], "serial"),
    "serial with a slash": (["NEW/1", "--mac", "AABBCCDDEE01", "--type", "melissa"], "serial"),
    "serial too long": (["N" * 65, "--mac", "AABBCCDDEE01", "--type", "melissa"], "serial"),
    "empty type": (["NEW1", "--mac", "AABBCCDDEE01", "--type", " "], "type"),
    "unknown owner": (
        ["NEW1", "--mac", "AABBCCDDEE01", "--type", "melissa", "--owner", "nobody@example.com"],
        "nobody@example.com",
    ),
    "disabled owner": (
        ["NEW1", "--mac", "AABBCCDDEE01", "--type", "melissa", "--owner", "gone@example.com"],
        "gone@example.com",
    ),
    "brand id not a number": (
        ["NEW1", "--mac", "AABBCCDDEE01", "--type", "melissa", "--brand-id", "abc"],
        "brand_id",
    ),
    "room id not a number": (
        ["NEW1", "--mac", "AABBCCDDEE01", "--type", "melissa", "--room-id", "x"],
        "room_id",
    ),
    "room id negative": (
        ["NEW1", "--mac", "AABBCCDDEE01", "--type", "melissa", "--room-id", "-3"],
        "room_id",
    ),
    "missing --type": (["NEW1", "--mac", "AABBCCDDEE01"], "--type"),
    "empty device secret": (
        ["NEW1", "--mac", "AABBCCDDEE01", "--type", "melissa", "--device-secret", ""],
        "device_secret: must not be empty",
    ),
    "blank device secret": (
        ["NEW1", "--mac", "AABBCCDDEE01", "--type", "melissa", "--device-secret", "   "],
        "device_secret: must not be empty",
    ),
    "device secret with NUL": (
        ["NEW1", "--mac", "AABBCCDDEE01", "--type", "melissa", "--device-secret", "abc\x00def"],
        "device_secret: must not contain NUL",
    ),
    "device secret with white space around it": (
        ["NEW1", "--mac", "AABBCCDDEE01", "--type", "melissa", "--device-secret", " x" * 10],
        "device_secret: must not start or end with white space",
    ),
    "device secret on a duplicate serial": (
        ["TAKEN", "--mac", "AABBCCDDEE01", "--type", "melissa", "--device-secret", "x" * 20],
        "TAKEN",
    ),
}


@pytest.mark.parametrize(("args", "fragment"), BAD_INPUTS.values(), ids=BAD_INPUTS.keys())
async def test_controllers_add_with_bad_input_fails_in_one_line_with_status_1_writing_nothing(
    args, fragment, database_url, runtime
):
    await make_user(runtime, "ana@example.com")
    await make_user(runtime, "gone@example.com")
    await disable_user(runtime, "gone@example.com")
    await make_controller(runtime, "TAKEN", mac="AABBCCDDEE00")
    before = await snapshot(runtime)
    result = await cli("controllers", "add", *args, database_url=database_url)
    assert_one_line_error(result, fragment)
    assert await snapshot(runtime) == before
