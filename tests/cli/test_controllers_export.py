"""`devicecontrol controllers export [FILE.csv]`."""

from __future__ import annotations

import csv
import io
from collections.abc import AsyncIterator, Iterator

import pytest
from sqlalchemy import select

from devicecontrol.config import Settings
from devicecontrol.controllers.csvfile import EXPORT_COLUMNS
from devicecontrol.controllers.export import EXPORT_BATCH_ROWS
from devicecontrol.database.tables import controller_assignments, controllers, users
from devicecontrol.runtime import Runtime
from devicecontrol.users.service import disable_user
from tests.cli.support import (
    assert_one_line_error,
    assert_succeeded,
    cli,
    cli_process,
    rows,
    snapshot,
)
from tests.factories import make_controller, make_user

HEADER = ",".join(EXPORT_COLUMNS) + "\n"
OWNERS = ("Ana@Example.com", "ben@example.com")

# awkward values a CSV writer must quote, or a spreadsheet might take for a formula
# (and device secrets, which an export cannot carry: only their digests are stored)
AWKWARD = """\
serial_number,mac,type,name,firmware_version,brand_id,device_group,room_id,claim_code,owner,online,device_secret
ODD-1,AABBCCDDEE01,melissa,"Kitchen, by ""the"" window",1.0,3,climate,4,CODE-1,ana@example.com,1,odd-1-device-secret
ODD-2,aabbccddeeff0011,vicki,=SUM(A1:A2),,1,,,CODE-2,,false,
ODD-3,AABBCCDDEE03,bobbie,Café ☕ ünïcode,2.0-beta,9,g_1,,,BEN@example.com,yes,odd-3-device-secret
"""  # noqa: E501
DEVICE_SECRETS = ("odd-1-device-secret", "odd-3-device-secret", "added-1-device-secret")


@pytest.fixture
def other_database_url(backend, database_factories, tmp_path) -> Iterator[str]:
    """A second empty, migrated database of the same engine, to import an export into."""
    directory = tmp_path / "other"
    directory.mkdir()
    factory = database_factories[backend]
    url = factory.new_url(directory)
    yield url
    factory.drop(url)


@pytest.fixture
async def other_runtime(other_database_url) -> AsyncIterator[Runtime]:
    runtime = Runtime.from_settings(Settings(database_url=other_database_url))
    yield runtime
    await runtime.close()


async def registry(runtime: Runtime) -> list[tuple]:
    """Every controller as the import sees it, owner by username, in registration order."""
    query = (
        select(
            controllers.c.serial_number,
            controllers.c.mac,
            controllers.c.type,
            controllers.c.name,
            controllers.c.firmware_version,
            controllers.c.brand_id,
            controllers.c.device_group,
            controllers.c.room_id,
            controllers.c.online,
            users.c.username,
        )
        .outerjoin(users, users.c.id == controllers.c.user_id)
        .order_by(controllers.c.id)
    )
    async with runtime.database.read() as connection:
        return [tuple(row) for row in await connection.execute(query)]


async def active_records(runtime: Runtime) -> list[tuple]:
    query = (
        select(
            controller_assignments.c.serial_number,
            users.c.username,
            controller_assignments.c.room_id,
        )
        .join(users, users.c.id == controller_assignments.c.user_id)
        .where(controller_assignments.c.deleted_at.is_(None))
        .order_by(controller_assignments.c.serial_number)
    )
    async with runtime.database.read() as connection:
        return [tuple(row) for row in await connection.execute(query)]


async def fill(runtime: Runtime, database_url: str, tmp_path, *, many: int = 0) -> None:
    """The owners, the awkward rows, and ``many`` plain ones (by import); one more by add."""
    for owner in OWNERS:
        await make_user(runtime, owner)
    text = AWKWARD + "".join(f"MANY-{i:05d},02CD{i:08X},smart_plug,,,,,,,,,\n" for i in range(many))
    path = tmp_path / "source.csv"
    path.write_text(text, encoding="utf-8")
    assert_succeeded(await cli("controllers", "import", str(path), database_url=database_url))
    await make_controller(runtime, "ADDED-1", mac="AABBCCDDEE77", owner="ben@example.com",
                          room_id=2, online=True, claim_code="SECRET-CLAIM",
                          device_secret="added-1-device-secret")  # fmt: skip


async def test_an_export_imported_into_an_empty_database_registers_the_same_controllers(
    database_url, runtime, other_runtime, tmp_path
):
    await fill(runtime, database_url, tmp_path)
    exported = tmp_path / "export.csv"
    result = await cli("controllers", "export", str(exported), database_url=database_url)
    assert_succeeded(result)
    assert "exported 4 controller(s)" in result.stdout
    assert "3 claim code(s) left empty" in result.stdout
    assert "3 device secret(s) not exported" in result.stdout
    assert exported.read_text(encoding="utf-8").startswith(HEADER)
    for owner in OWNERS:  # accounts are not part of the export
        await make_user(other_runtime, owner)
    imported = await cli("controllers", "import", str(exported),
                         database_url=other_runtime.database.url)  # fmt: skip
    assert_succeeded(imported)
    assert "added 4" in imported.stdout
    assert "4 added without a device secret" in imported.stdout  # the operator is told
    assert await registry(other_runtime) == await registry(runtime)
    assert await active_records(other_runtime) == await active_records(runtime)
    copied = await rows(other_runtime, controllers)
    assert [row.claim_code_digest for row in copied] == [None] * 4  # no claim code came along
    assert [row.device_secret_digest for row in copied] == [None] * 4  # nor a device secret


async def test_an_export_imported_into_the_same_database_changes_nothing(
    database_url, runtime, tmp_path
):
    await fill(runtime, database_url, tmp_path, many=EXPORT_BATCH_ROWS + 10)  # several batches
    await make_user(runtime, "gone@example.com")
    await make_controller(runtime, "GONE-1", mac="AABBCCDDEE88", owner="gone@example.com")
    await disable_user(runtime, "gone@example.com")
    exported = tmp_path / "export.csv"
    assert_succeeded(await cli("controllers", "export", str(exported), database_url=database_url))
    with exported.open(newline="", encoding="utf-8") as handle:
        serials = [row["serial_number"] for row in csv.DictReader(handle)]
    assert serials == [row[0] for row in await registry(runtime)]
    before = await snapshot(runtime)
    again = await cli("controllers", "import", str(exported), database_url=database_url)
    assert_succeeded(again)
    assert again.stdout == f"added 0, already registered {len(serials)}, skipped 0 bad row(s)\n"
    # the stored claim code and device secret digests are kept
    assert await snapshot(runtime) == before
    assert sum(
        row.device_secret_digest is not None for row in await rows(runtime, controllers)
    ) == (len(DEVICE_SECRETS))


async def test_export_without_a_file_writes_the_csv_to_stdout(database_url, runtime, tmp_path):
    await fill(runtime, database_url, tmp_path)
    # a real process: the CSV goes through its stdout pipe, the summary through its stderr
    result = await cli_process("controllers", "export", database_url=database_url)
    assert_succeeded(result)
    assert result.stdout.startswith(HEADER)
    exported = list(csv.DictReader(io.StringIO(result.stdout)))
    assert [row["serial_number"] for row in exported] == ["ODD-1", "ODD-2", "ODD-3", "ADDED-1"]
    odd_1, odd_2, odd_3, added = exported
    assert odd_1 == {
        "serial_number": "ODD-1", "mac": "AABBCCDDEE01", "type": "melissa",
        "name": 'Kitchen, by "the" window', "firmware_version": "1.0", "brand_id": "3",
        "device_group": "climate", "room_id": "4", "claim_code": "",
        "owner": "Ana@Example.com", "online": "true",
    }  # fmt: skip
    assert (odd_2["mac"], odd_2["name"], odd_2["owner"], odd_2["online"]) == (
        "AABBCCDDEEFF0011", "=SUM(A1:A2)", "", "false",
    )  # fmt: skip
    assert (odd_3["name"], odd_3["owner"], odd_3["room_id"]) == (
        "Café ☕ ünïcode", "ben@example.com", "",
    )  # fmt: skip
    assert (added["owner"], added["room_id"], added["online"]) == ("ben@example.com", "2", "true")
    assert "SECRET-CLAIM" not in result.stdout and "CODE-1" not in result.stdout
    assert "device_secret" not in result.stdout
    for secret in DEVICE_SECRETS:
        assert secret not in result.stdout
    assert result.stderr.strip().startswith("exported 4 controller(s) to stdout")
    assert "3 device secret(s) not exported" in result.stderr


async def test_an_empty_registry_exports_only_the_header(database_url, tmp_path):
    to_stdout = await cli("controllers", "export", database_url=database_url)
    assert_succeeded(to_stdout)
    assert to_stdout.stdout == HEADER
    path = tmp_path / "empty.csv"
    to_file = await cli("controllers", "export", str(path), database_url=database_url)
    assert_succeeded(to_file)
    assert "exported 0 controller(s)" in to_file.stdout
    assert path.read_text(encoding="utf-8") == HEADER


async def test_a_failed_export_leaves_an_existing_file_as_it_was(tmp_path):
    path = tmp_path / "export.csv"
    path.write_text("what was there\n", encoding="utf-8")
    unreachable = f"sqlite:///{tmp_path / 'no-such-directory' / 'x.db'}"
    result = await cli("controllers", "export", str(path), database_url=unreachable)
    assert_one_line_error(result, "database unavailable")
    assert path.read_text(encoding="utf-8") == "what was there\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export.csv"]  # no temporary left
