"""`devicecontrol controllers rotate-secret SERIAL`."""

from __future__ import annotations

import json

import pytest

from devicecontrol.database.tables import controllers
from devicecontrol.devices.identity import device_secret_digest
from tests.cli.support import (
    assert_one_line_error,
    assert_succeeded,
    cli,
    cli_process,
    connects,
    rows,
    snapshot,
)
from tests.factories import make_controller

OLD_SECRET = "plug-1-old-device-secret"


async def stored_digest(runtime, serial: str) -> str | None:
    [row] = await rows(runtime, controllers, controllers.c.serial_number == serial)
    return row.device_secret_digest


async def test_rotate_secret_prints_the_new_secret_on_the_last_line_and_the_old_one_stops_working(
    database_url, runtime
):
    await make_controller(runtime, "PLUG-1", device_secret=OLD_SECRET)
    await make_controller(runtime, "PLUG-2", device_secret="plug-2-device-secret-0123")
    assert await connects(runtime, "PLUG-1", OLD_SECRET)

    result = await cli("controllers", "rotate-secret", "PLUG-1", database_url=database_url)

    assert_succeeded(result)
    *before_it, secret = result.stdout.splitlines()
    assert before_it and "shown this once" in before_it[-1]
    assert len(secret) >= 32 and secret.strip() == secret and " " not in secret
    assert await stored_digest(runtime, "PLUG-1") == device_secret_digest(secret)
    assert secret not in repr(await snapshot(runtime))
    # at once: no restart, no cache between the command and the link's check
    assert await connects(runtime, "PLUG-1", secret)
    assert not await connects(runtime, "PLUG-1", OLD_SECRET)
    # nobody else's secret changed
    assert await connects(runtime, "PLUG-2", "plug-2-device-secret-0123")
    assert not await connects(runtime, "PLUG-2", secret)


async def test_rotate_secret_writes_one_audit_line_naming_the_serial_never_the_secret(
    database_url, runtime
):
    await make_controller(runtime, "PLUG-1", device_secret=OLD_SECRET)
    result = await cli("controllers", "rotate-secret", "PLUG-1", database_url=database_url)
    assert_succeeded(result)
    secret = result.stdout.splitlines()[-1]
    [line] = result.stderr.splitlines()
    audit = json.loads(line)
    assert (audit["logger"], audit["event"], audit["outcome"]) == (
        "devicecontrol.audit",
        "device_secret_rotation",
        "success",
    )
    assert audit["serial_number"] == "PLUG-1"
    for leaked in (secret, device_secret_digest(secret), OLD_SECRET):
        assert leaked not in result.stderr


async def test_rotate_secret_gives_a_device_registered_without_one_its_first(database_url, runtime):
    await make_controller(runtime, "BARE-1")  # as an import without device_secret leaves it
    assert await stored_digest(runtime, "BARE-1") is None
    result = await cli("controllers", "rotate-secret", "BARE-1", database_url=database_url)
    assert_succeeded(result)
    assert await connects(runtime, "BARE-1", result.stdout.splitlines()[-1])


async def test_rotating_twice_leaves_only_the_last_secret_working(database_url, runtime):
    await make_controller(runtime, "PLUG-1", device_secret=OLD_SECRET)
    first, second = [
        (
            await cli("controllers", "rotate-secret", "PLUG-1", database_url=database_url)
        ).stdout.splitlines()[-1]
        for _ in range(2)
    ]
    assert first != second
    assert not await connects(runtime, "PLUG-1", first)
    assert await connects(runtime, "PLUG-1", second)


async def test_rotate_secret_in_a_real_process_ends_its_stdout_with_the_secret(
    database_url, runtime
):
    """What a script reads with `| tail -n 1`: the secret, alone, then the newline."""
    await make_controller(runtime, "PLUG-1", device_secret=OLD_SECRET)
    result = await cli_process("controllers", "rotate-secret", "PLUG-1", database_url=database_url)
    assert_succeeded(result)
    secret = result.stdout.splitlines()[-1]
    assert result.stdout.endswith(f"\n{secret}\n")
    assert await connects(runtime, "PLUG-1", secret)


@pytest.mark.parametrize("serial", ["NOPE-1", "plug-1", "BAD SERIAL", "x" * 65])
async def test_rotate_secret_of_an_unknown_serial_fails_in_one_line_and_changes_nothing(
    serial, database_url, runtime
):
    await make_controller(runtime, "PLUG-1", device_secret=OLD_SECRET)
    before = await snapshot(runtime)
    result = await cli("controllers", "rotate-secret", serial, database_url=database_url)
    assert_one_line_error(result, "no controller has the serial number")
    assert await snapshot(runtime) == before
    assert await connects(runtime, "PLUG-1", OLD_SECRET)
