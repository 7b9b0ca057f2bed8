"""SQLite write transactions (db.py, sqlite_checkpoints.py): the write lock is held for the
statements alone, waited for with the loop free, and the commits never checkpoint on the
loop's thread."""

from __future__ import annotations

import asyncio
import os
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.exc import OperationalError

from devicecontrol.database import engine as db
from devicecontrol.database import sqlite_checkpoints
from devicecontrol.database.engine import Database
from tests.devices.link.support import eventually

ROW_BYTES = 4000
CREATE = "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL)"


@pytest.fixture
async def database(tmp_path: Path) -> AsyncIterator[Database]:
    database = Database(f"sqlite:///{tmp_path / 'writes.db'}")
    async with database.write() as connection:
        await connection.execute(text(CREATE))
    yield database
    await database.dispose()


def holder_of_the_lock(database: Database) -> sqlite3.Connection:
    """Another writer (as another process would be), holding the write lock."""
    other = sqlite3.connect(database.engine.url.database or "", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    return other


def file_size(path: str) -> int:
    return os.stat(path).st_size


async def count_notes(database: Database) -> int:
    async with database.read() as reader:
        return (await reader.execute(text("SELECT count(*) FROM notes"))).scalar_one()


async def test_the_statements_of_a_write_run_without_a_turn_of_the_loop_between_them(database):
    # with the lock taken, nothing else of the process runs until the block commits: the
    # lock is never held while the loop serves others (a busy device link's batches)
    others_ran = asyncio.Event()
    asyncio.get_running_loop().call_soon(others_ran.set)
    async with database.write() as connection:
        for n in range(3):
            await connection.execute(text("INSERT INTO notes (body) VALUES (:b)"), {"b": str(n)})
        ran_inside = others_ran.is_set()
    await asyncio.sleep(0)
    assert (ran_inside, others_ran.is_set()) == (False, True)
    assert await count_notes(database) == 3


async def test_a_write_waits_for_another_writer_with_the_loop_free_and_then_commits(database):
    other = holder_of_the_lock(database)
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.005)

    ticker = asyncio.create_task(tick())
    asyncio.get_running_loop().call_later(0.3, other.commit)
    try:
        async with database.write() as connection:
            await connection.execute(text("INSERT INTO notes (body) VALUES ('after')"))
    finally:
        ticker.cancel()
        other.close()
    assert ticks >= 20  # the loop ran on while the write waited (0.3 s, a tick every 5 ms)
    assert await count_notes(database) == 1


async def test_a_write_that_never_gets_the_lock_fails_as_locked_and_writes_nothing(
    database, monkeypatch
):
    monkeypatch.setattr(db, "SQLITE_BUSY_TIMEOUT_MS", 200)
    other = holder_of_the_lock(database)
    try:
        with pytest.raises(OperationalError) as raised:
            async with database.write() as connection:
                await connection.execute(text("INSERT INTO notes (body) VALUES ('never')"))
    finally:
        other.rollback()
        other.close()
    assert raised.value.orig.sqlite_errorcode == sqlite3.SQLITE_BUSY
    assert await count_notes(database) == 0
    async with database.write() as connection:  # the writer is usable again
        await connection.execute(text("INSERT INTO notes (body) VALUES ('later')"))
    assert await count_notes(database) == 1


async def test_a_write_that_fails_half_way_leaves_nothing_and_one_that_ran_nothing_commits(
    database,
):
    with pytest.raises(RuntimeError):
        async with database.write() as connection:
            await connection.execute(text("INSERT INTO notes (body) VALUES ('half')"))
            raise RuntimeError("half way")
    async with database.write():
        pass  # took the lock and ran nothing: the lock is given back
    other = holder_of_the_lock(database)  # which it would not be, were it still held
    other.rollback()
    other.close()
    assert await count_notes(database) == 0


async def test_commits_leave_the_checkpoints_to_the_thread_which_makes_them_soon(
    database, monkeypatch
):
    monkeypatch.setattr(sqlite_checkpoints, "CHECKPOINT_EVERY_S", 0.2)
    await database.dispose()  # its checkpointer restarts on the next write, at 0.2 s
    path = database.engine.url.database or ""
    before = file_size(path)
    async with database.write() as connection:  # 2,000 pages: past SQLite's own 1,000
        await connection.execute(
            text("INSERT INTO notes (body) VALUES (:body)"),
            [{"body": "x" * ROW_BYTES} for _ in range(2000)],
        )
    # SQLite alone would have checkpointed inside that commit, on the loop's thread
    assert file_size(path) < before + 1_000_000
    await eventually(lambda: file_size(path) > before + 7_000_000, within=5)
    assert await count_notes(database) == 2000
