"""Backups taken while `serve` runs and writes, restored, and served again.

SQLite: ``devicecontrol db backup`` (SQLite's online backup) while a client assigns
controllers one after another; restore is a copy of the file. PostgreSQL: ``pg_dump
--format=custom`` under the same writes, ``pg_restore`` into a new database. Either way
the restored database is upgraded with ``db upgrade`` (a no-op) and served, and then:
users log in, a token issued before the backup still works, the owner's list holds exactly
the assignments of one moment (a prefix of the client's sequence, including every one
finished before the backup began), and new writes succeed.
"""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import threading
import time
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg
import httpx
import pytest
from sqlalchemy.engine import make_url

from tests.conftest import POSTGRESQL_ONLY, POSTGRESQL_URL
from tests.e2e.support import ANA, Client, bearer, controller, ok, provision, tokens
from tests.processes import run_cli, running_server

APP = Client("backup-app", "backup-client-secret-0123456789")
PASSWORD = "backup-password-1"
HTTP_TIMEOUT_S = 15
COMMAND_TIMEOUT_S = 60
CONTROLLERS = 400
WRITE_PAUSE_S = 0.02  # the writer's pace: it must still be writing when the backup ends
WRITES_WITHIN_S = 20  # waiting for the writer to make progress is bounded too


def serial(number: int) -> str:
    return f"BK-{number:04d}"


def access_token(http: httpx.Client) -> str:
    """A fresh log-in of ana's (a token row written)."""
    return tokens(http, APP, ANA, PASSWORD)["access_token"]


@dataclass
class Writer:
    """Assigns BK-0000, BK-0001, ... to ana one at a time, logging in again now and then."""

    base_url: str
    assigned: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    stopping: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        try:
            with httpx.Client(base_url=self.base_url, timeout=HTTP_TIMEOUT_S) as http:
                self._assign_in_turn(http)
        except Exception as exc:  # reported by the test's thread, not lost in this one
            self.failures.append(repr(exc))

    def _assign_in_turn(self, http: httpx.Client) -> None:
        token = access_token(http)
        for number in range(CONTROLLERS):
            if self.stopping.is_set():
                return
            if number % 10 == 9:
                token = access_token(http)  # a token row written as well
            path = f"/v1/controllers/{serial(number)}/assign"
            response = http.post(path, headers=bearer(token))
            assert response.status_code == 200, f"{path}: {response.status_code} {response.text}"
            self.assigned.append(serial(number))
            time.sleep(WRITE_PAUSE_S)

    def wait_for(self, count: int) -> None:
        deadline = time.monotonic() + WRITES_WITHIN_S
        while len(self.assigned) < count and not self.failures:
            assert time.monotonic() < deadline, f"only {len(self.assigned)} assignments made"
            time.sleep(0.01)


@dataclass
class BeforeTheBackup:
    token: str  # issued before the backup began
    finished: list[str]  # assignments answered before it began
    by_its_end: list[str]  # ... and before it ended


def back_up_under_writes(database_url: str, tmp_path: Path, take_backup: Callable[[], None]):
    """Serve, write, back up meanwhile; the service must not notice the backup."""
    # a client, ana owning BK-OWNED, and CONTROLLERS unowned ones registered after it
    owned = controller("BK-OWNED", "02:00:00:00:ff:ff", "melissa", owner=ANA)
    unowned = [controller(serial(n), f"0200000{n:05X}") for n in range(CONTROLLERS)]
    provision(database_url, client=APP, users={ANA: PASSWORD}, controllers=[owned, *unowned])
    with running_server(database_url, tmp_path) as server:
        with httpx.Client(base_url=server.base_url, timeout=HTTP_TIMEOUT_S) as http:
            token = access_token(http)
        writer = Writer(server.base_url)
        thread = threading.Thread(target=writer.run, daemon=True)
        thread.start()
        try:
            writer.wait_for(5)
            finished = list(writer.assigned)
            take_backup()
            by_its_end = list(writer.assigned)
            writer.wait_for(len(by_its_end) + 3)  # and it goes on writing
        finally:
            writer.stopping.set()
            thread.join(timeout=HTTP_TIMEOUT_S)
        assert not thread.is_alive()
        assert not writer.failures, writer.failures
        assert len(by_its_end) > len(finished), "no write answered while the backup ran"
        assert "Traceback" not in server.stderr(), server.stderr()
    return BeforeTheBackup(token, finished, by_its_end)


def assert_restored(restored_url: str, workdir: Path, before: BeforeTheBackup) -> None:
    """``db upgrade`` is harmless, and the restored database serves what the backup held."""
    upgraded = run_cli("db", "upgrade", database_url=restored_url)
    ok(upgraded)
    assert "newest revision" in upgraded.stdout
    workdir.mkdir()
    with (
        running_server(restored_url, workdir) as server,
        httpx.Client(base_url=server.base_url, timeout=HTTP_TIMEOUT_S) as http,
    ):
        me = http.get("/v1/users/me", headers=bearer(before.token))
        assert me.status_code == 200, me.text
        token = access_token(http)
        listed = http.get("/v1/controllers", params={"page_size": 500}, headers=bearer(token))
        assert listed.status_code == 200, listed.text
        owned = [c["serial_number"] for c in listed.json()["_embedded"]["controller"]]
        assert owned[0] == "BK-OWNED"
        held = owned[1:]
        # one moment of the writer's sequence: everything finished before the backup began,
        # nothing that had not begun before it ended
        assert held == [serial(n) for n in range(len(held))], held
        assert len(before.finished) <= len(held) <= len(before.by_its_end) + 1, held

        # the history came along, and new writes work (identity sequences restored too)
        history = http.get(f"/v1/controllers/{held[0]}/assignments", headers=bearer(token))
        assert history.status_code == 200, history.text
        next_free = serial(len(held))
        assigned = http.post(f"/v1/controllers/{next_free}/assign", headers=bearer(token))
        assert assigned.status_code == 200, assigned.text
        assert access_token(http) != token
        assert "Traceback" not in server.stderr(), server.stderr()


# --- SQLite ------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["sqlite"])
def test_sqlite_online_backup_under_writes_restores_to_a_working_service(database_url, tmp_path):
    backup = tmp_path / "backups" / "devicecontrol-backup.db"
    backup.parent.mkdir()

    def take_backup() -> None:
        result = run_cli("db", "backup", str(backup), database_url=database_url)
        ok(result)
        assert str(backup) in result.stdout

    before = back_up_under_writes(database_url, tmp_path, take_backup)
    with closing(sqlite3.connect(backup)) as copy:
        assert copy.execute("PRAGMA integrity_check").fetchone() == ("ok",)

    restored = tmp_path / "restored" / "devicecontrol.db"  # a restore is a copy of the file
    restored.parent.mkdir()
    restored.write_bytes(backup.read_bytes())
    assert_restored(f"sqlite:///{restored}", tmp_path / "serve-restored", before)


@pytest.mark.parametrize("backend", ["sqlite"])
def test_sqlite_backup_refuses_to_overwrite_or_to_invent_a_database(database_url, tmp_path):
    existing = tmp_path / "existing.db"
    existing.write_bytes(b"keep me")
    refused = run_cli("db", "backup", str(existing), database_url=database_url)
    assert refused.returncode == 1
    assert "exists" in refused.stderr and len(refused.stderr.splitlines()) == 1
    assert existing.read_bytes() == b"keep me"

    missing = f"sqlite:///{tmp_path / 'no-such.db'}"
    nothing = run_cli("db", "backup", str(tmp_path / "copy.db"), database_url=missing)
    assert nothing.returncode == 1
    assert "no SQLite database" in nothing.stderr
    assert not (tmp_path / "no-such.db").exists() and not (tmp_path / "copy.db").exists()


def test_db_backup_points_postgresql_users_to_pg_dump(tmp_path):
    result = run_cli(
        "db", "backup", str(tmp_path / "x.db"), database_url="postgresql://u@127.0.0.1:1/db"
    )
    assert result.returncode == 1
    assert "pg_dump" in result.stderr and len(result.stderr.splitlines()) == 1


# --- PostgreSQL --------------------------------------------------------------------------


def _admin(statement: str) -> None:
    async def run() -> None:
        dsn = make_url(POSTGRESQL_URL).set(drivername="postgresql")
        connection = await asyncpg.connect(dsn.render_as_string(hide_password=False), timeout=10)
        try:
            await connection.execute(statement)
        finally:
            await connection.close()

    asyncio.run(run())


def _pg_tool(*command: str) -> None:
    result = subprocess.run(
        command, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, check=False
    )
    assert result.returncode == 0, f"{command[0]} exited {result.returncode}:\n{result.stderr}"


@POSTGRESQL_ONLY
def test_pg_dump_under_writes_and_pg_restore_into_a_new_database(database_url, tmp_path):
    dump = tmp_path / "devicecontrol.dump"

    def take_backup() -> None:
        _pg_tool("pg_dump", "--format=custom", f"--file={dump}", f"--dbname={database_url}")

    before = back_up_under_writes(database_url, tmp_path, take_backup)
    restored_name = f"{make_url(database_url).database}_restored"
    restored_url = (
        make_url(database_url).set(database=restored_name).render_as_string(hide_password=False)
    )
    _admin(f'CREATE DATABASE "{restored_name}"')
    try:
        _pg_tool("pg_restore", "--exit-on-error", "--no-owner", "--no-privileges",
                 f"--dbname={restored_url}", str(dump))  # fmt: skip
        assert_restored(restored_url, tmp_path / "serve-restored", before)
    finally:
        _admin(f'DROP DATABASE IF EXISTS "{restored_name}" WITH (FORCE)')
