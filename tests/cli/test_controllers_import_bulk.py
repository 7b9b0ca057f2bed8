"""`controllers import` on files larger than one batch, and the rules a rerun depends on."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import time

from devicecontrol.controllers.provisioning import IMPORT_BATCH_ROWS
from devicecontrol.database.tables import controller_assignments, controllers
from devicecontrol.users.service import disable_user
from tests.cli.support import assert_succeeded, cli, reported_lines, rows, snapshot
from tests.factories import make_controller, make_user
from tests.processes import DEVICECONTROL, child_environment

ROWS = 2 * IMPORT_BATCH_ROWS + 200  # three batches
OWNERS = ("ana@example.com", "ben@example.com")


def serial(index: int) -> str:
    return f"BULK-{index:06d}"


def large_file(tmp_path, bad: dict[int, str] | None = None, *, owned_every: int = 7) -> str:
    """ROWS rows (line n holds row n - 2); every 7th is owned, with a room; ``bad`` replaces
    the rows on those line numbers."""
    lines = ["serial_number,mac,type,owner,room_id,claim_code"]
    for index in range(ROWS):
        owned = owned_every > 0 and index % owned_every == 0
        owner = OWNERS[index % 2] if owned else ""
        room = str(index % 5) if owned else ""
        lines.append(f"{serial(index)},02AB{index:08X},smart_plug,{owner},{room},C{index}")
    for line, text in (bad or {}).items():
        lines[line - 1] = text
    path = tmp_path / "large.csv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


# bad rows in the second and third batches, so that the first batch is already written when
# they are met; line 10002 repeats the serial of line 2
LATE_BAD = {
    7000: "BULK-X1,NOT-A-MAC,smart_plug,,,",
    10002: f"{serial(0)},02AB000000FF,smart_plug,,,",
    ROWS: "BULK-X2,02AB0000FFFF,smart_plug,nobody@example.com,,",
}


async def test_a_bad_row_after_the_first_batch_still_writes_nothing_and_every_one_is_reported(
    database_url, runtime, tmp_path
):
    for owner in OWNERS:
        await make_user(runtime, owner)
    before = await snapshot(runtime)
    result = await cli("controllers", "import", large_file(tmp_path, LATE_BAD),
                       database_url=database_url)  # fmt: skip
    assert result.returncode == 1
    assert reported_lines(result.stderr) == sorted(LATE_BAD)
    assert "repeats line 2" in result.stderr
    assert "nothing was imported" in result.stderr.splitlines()[-1]
    assert await snapshot(runtime) == before


async def test_skip_invalid_registers_every_good_row_of_a_large_file_in_file_order(
    database_url, runtime, tmp_path
):
    owner_ids = {owner: await make_user(runtime, owner) for owner in OWNERS}
    path = large_file(tmp_path, LATE_BAD)
    result = await cli("controllers", "import", path, "--skip-invalid", database_url=database_url)
    assert_succeeded(result)
    assert reported_lines(result.stderr) == sorted(LATE_BAD)
    good = ROWS - len(LATE_BAD)
    assert f"added {good}, already registered 0, skipped 3 bad row(s)" in result.stdout
    registered = await rows(runtime, controllers)
    expected = [serial(line - 2) for line in range(2, ROWS + 2) if line not in LATE_BAD]
    assert [row.serial_number for row in registered] == expected  # ids follow the file
    owned = {row.id: row for row in registered if row.user_id is not None}
    assert len(owned) == len([i for i in range(ROWS) if i % 7 == 0 and i + 2 not in LATE_BAD])
    records = await rows(runtime, controller_assignments)
    assert sorted(r.controller_id for r in records) == sorted(owned)
    for record in records:
        controller = owned[record.controller_id]
        index = int(controller.serial_number.removeprefix("BULK-"))
        assert record.user_id == owner_ids[OWNERS[index % 2]] == controller.user_id
        assert (record.serial_number, record.mac) == (controller.serial_number, controller.mac)
        assert record.room_id == index % 5 == controller.room_id
        assert record.deleted_at is None


async def test_a_rerun_of_a_large_file_changes_nothing(database_url, runtime, tmp_path):
    for owner in OWNERS:
        await make_user(runtime, owner)
    path = large_file(tmp_path)
    assert_succeeded(await cli("controllers", "import", path, database_url=database_url))
    before = await snapshot(runtime)
    again = await cli("controllers", "import", path, database_url=database_url)
    assert_succeeded(again)
    assert f"added 0, already registered {ROWS}, skipped 0" in again.stdout
    assert await snapshot(runtime) == before


async def test_a_rerun_naming_an_owner_disabled_since_changes_nothing_but_a_new_row_may_not(
    database_url, runtime, tmp_path
):
    await make_user(runtime, "gone@example.com")
    await make_controller(runtime, "KEPT", mac="AABBCCDDEE01", owner="gone@example.com")
    await disable_user(runtime, "gone@example.com")
    before = await snapshot(runtime)
    path = tmp_path / "owners.csv"
    path.write_text(
        "serial_number,mac,type,owner\n"
        "KEPT,AABBCCDDEE01,smart_plug,gone@example.com\n"
        "NEW,AABBCCDDEE02,smart_plug,gone@example.com\n",
        encoding="utf-8",
    )
    result = await cli("controllers", "import", str(path), "--skip-invalid",
                       database_url=database_url)  # fmt: skip
    assert_succeeded(result)
    assert reported_lines(result.stderr) == [3]
    assert "no active account is named gone@example.com" in result.stderr
    assert "added 0, already registered 1, skipped 1" in result.stdout
    assert await snapshot(runtime) == before


async def test_a_conflicting_row_names_the_fields_that_differ_but_no_claim_code(
    database_url, runtime, tmp_path
):
    await make_controller(runtime, "REG-1", mac="AABBCCDDEE01", type="melissa",
                          claim_code="STORED-CODE")  # fmt: skip
    path = tmp_path / "conflict.csv"
    path.write_text(
        "serial_number,mac,type,claim_code\nREG-1,AABBCCDDEE02,melissa,OTHER-CODE\n",
        encoding="utf-8",
    )
    before = await snapshot(runtime)
    result = await cli("controllers", "import", str(path), database_url=database_url)
    assert result.returncode == 1
    [problem, _summary] = result.stderr.splitlines()
    assert problem.startswith("line 2: serial_number REG-1 is registered with other values")
    assert "(mac, claim_code)" in problem
    assert "CODE" not in result.stderr
    assert await snapshot(runtime) == before


def read_until_closed(leader: int, timeout_s: float = 120) -> bytes:
    shown, deadline = b"", time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not select.select([leader], [], [], 1)[0]:
            continue
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # Linux: EIO once the terminal's last writer has gone
            return shown
        if not chunk:
            return shown
        shown += chunk
    raise AssertionError(f"the terminal stayed open for {timeout_s} s")


def test_the_progress_bar_shows_when_stderr_is_a_terminal(database_url, tmp_path):
    """(Everywhere else stderr is captured, and holds only the report's lines.)"""
    path = large_file(tmp_path, owned_every=0)  # no accounts needed
    leader, follower = pty.openpty()
    process = subprocess.Popen(
        [*DEVICECONTROL, "controllers", "import", path, "--database-url", database_url],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=follower,
        env=child_environment({"TERM": "xterm", "COLUMNS": "100"}),
    )
    os.close(follower)
    try:
        shown = read_until_closed(leader)  # read as it comes: a full terminal would block it
        stdout, _ = process.communicate(timeout=120)
    finally:
        os.close(leader)
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, shown.decode(errors="replace")
    assert f"added {ROWS}".encode() in stdout
    assert b"importing" in shown
