"""`devicecontrol serve` purges dead tokens on its own, every DEVICECONTROL_PURGE_INTERVAL s."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from devicecontrol.auth.tokens import digest
from devicecontrol.clock import utcnow
from devicecontrol.database.tables import (
    access_tokens,
    clients,
    refresh_tokens,
    throttle_failures,
    users,
)
from tests.cli.support import run_cli_in_process
from tests.e2e.support import ANA, Client, in_database, ok, provision, token_call, tokens
from tests.processes import Server, free_port, run_cli, running_server

APP = Client("purge-app", "purge-client-secret-0123456789")
PASSWORD = "purge-password-123"
PURGE_DEADLINE_S = 15.0


def stored_digests(database_url: str) -> dict[str, set[str]]:
    async def read(connection: AsyncConnection) -> dict[str, set[str]]:
        return {
            table.name: set((await connection.execute(select(table.c.digest))).scalars())
            for table in (access_tokens, refresh_tokens)
        }

    return in_database(database_url, read)


def throttle_subjects(database_url: str) -> set[str]:
    async def read(connection: AsyncConnection) -> set[str]:
        query = select(throttle_failures.c.subject_digest)
        return set((await connection.execute(query)).scalars())

    return in_database(database_url, read)


def me_status(http: httpx.Client, access_token: str) -> int:
    return http.get("/v1/users/me", headers={"Authorization": f"Bearer {access_token}"}).status_code


def dead_rows_planted(database_url: str, http: httpx.Client) -> tuple[dict[str, Any], set[str]]:
    """Three logins: one aged past expiry, one revoked through the API, one left alone.

    Returns the live login and the digests that must disappear; an old throttle failure
    (past every window) and a recent one go in beside them.
    """
    expired, revoked, live = (tokens(http, APP, ANA, PASSWORD) for _ in range(3))
    doomed = {digest(auth[token]) for auth in (expired, revoked)
              for token in ("access_token", "refresh_token")}  # fmt: skip
    # stored, checked while still live: once aged or revoked, a purge may take them any time
    assert doomed <= set().union(*stored_digests(database_url).values())
    past = utcnow() - timedelta(seconds=1)

    async def age(connection: AsyncConnection) -> None:
        for table, token in ((access_tokens, "access_token"), (refresh_tokens, "refresh_token")):
            await connection.execute(
                update(table)
                .where(table.c.digest == digest(expired[token]))
                .values(expires_at=past)
            )
        await connection.execute(
            insert(throttle_failures),
            [
                {"scope": "login_username", "subject_digest": digest("old"),
                 "created_at": utcnow() - timedelta(days=1)},
                {"scope": "login_username", "subject_digest": digest("recent"),
                 "created_at": utcnow()},
            ],
        )  # fmt: skip

    in_database(database_url, age)
    revoke = token_call(http, APP, "revoke", token=revoked["refresh_token"])
    assert revoke.status_code == 200, revoke.text
    return live, doomed


def wait_until_purged(server: Server, database_url: str, doomed: set[str]) -> float:
    """Seconds until none of the doomed digests nor the old throttle row is stored."""
    started = time.monotonic()
    while True:
        assert server.process.poll() is None, f"serve exited:\n{server.stderr()}"
        stored = stored_digests(database_url)
        left = doomed & (stored["access_tokens"] | stored["refresh_tokens"])
        if not left and digest("old") not in throttle_subjects(database_url):
            return time.monotonic() - started
        elapsed = time.monotonic() - started
        assert elapsed < PURGE_DEADLINE_S, (
            f"{len(left)} dead token rows still stored after {elapsed:.1f} s:\n{server.stderr()}"
        )
        time.sleep(0.2)


@pytest.mark.parametrize("workers", [1, 2], ids=["one worker", "two workers"])
def test_serve_purges_dead_tokens_on_its_schedule_and_keeps_live_ones(
    workers, database_url, tmp_path
):
    provision(database_url, client=APP, users={ANA: PASSWORD})
    with (
        running_server(
            database_url,
            tmp_path,
            "--workers",
            str(workers),
            env={"DEVICECONTROL_PURGE_INTERVAL": "1"},
        ) as server,
        httpx.Client(base_url=server.base_url, timeout=10) as http,
    ):
        live, doomed = dead_rows_planted(database_url, http)

        wait_until_purged(server, database_url, doomed)

        # the server is still up, and the live login still works in every way
        assert server.process.poll() is None
        stored = stored_digests(database_url)
        assert stored["access_tokens"] >= {digest(live["access_token"])}
        assert digest(live["refresh_token"]) in stored["refresh_tokens"]
        assert digest("recent") in throttle_subjects(database_url)
        assert me_status(http, live["access_token"]) == 200
        renewed = token_call(http, APP, "renew", refresh_token=live["refresh_token"])
        assert renewed.status_code == 200, renewed.text
        assert me_status(http, renewed.json()["auth"]["access_token"]) == 200

        # not a one-off at start-up: rows that die later are purged by a later run
        _, second_doomed = dead_rows_planted(database_url, http)
        wait_until_purged(server, database_url, second_doomed)
        assert me_status(http, live["access_token"]) == 200
    assert "scheduled purge failed" not in server.stderr()
    assert "Traceback" not in server.stderr()


def plant_dead_rows_directly(database_url: str) -> set[str]:
    """An expired refresh token and a revoked access token, written before any server runs."""
    now = utcnow()

    async def plant(connection: AsyncConnection) -> set[str]:
        user_id = (
            await connection.execute(select(users.c.id).where(users.c.username_key == ANA))
        ).scalar_one()
        client_pk = (
            await connection.execute(
                select(clients.c.id).where(clients.c.client_id == APP.client_id)
            )
        ).scalar_one()
        owner = {"user_id": user_id, "client_pk": client_pk, "created_at": now - timedelta(days=2)}
        await connection.execute(
            insert(refresh_tokens).values(
                digest=digest("expired refresh"), expires_at=now - timedelta(days=1), **owner
            )
        )
        await connection.execute(
            insert(access_tokens).values(
                digest=digest("revoked access"), expires_at=now + timedelta(days=1),
                revoked_at=now - timedelta(days=1), **owner,
            )
        )  # fmt: skip
        return {digest("expired refresh"), digest("revoked access")}

    return in_database(database_url, plant)


# with a one-second interval the first run comes 0.5 to 1 s after start-up, before the
# server answers or soon after: a purge at start-up, or a first delay that ignored the
# interval, would have run within this much more
START_UP_WATCH_S = 1.5


@pytest.mark.parametrize("backend", ["sqlite"])
def test_serve_with_the_default_interval_does_not_purge_at_start_up(database_url, tmp_path):
    """The first scheduled run waits at least half the interval (an hour by default).

    On SQLite only: when the first run comes is the scheduler's, the same on every backend
    (the purge itself is tested on both, above). That the rows were purgeable all along is
    shown by ``tokens purge`` (the same purge) taking them once the server is gone.
    """
    provision(database_url, client=APP, users={ANA: PASSWORD})
    doomed = plant_dead_rows_directly(database_url)
    with running_server(database_url, tmp_path) as server:
        time.sleep(START_UP_WATCH_S)  # a window in which nothing may happen: no condition
        assert server.process.poll() is None
        stored = stored_digests(database_url)
        assert doomed <= stored["access_tokens"] | stored["refresh_tokens"]
    assert "purged" not in server.stderr()
    ok(run_cli_in_process("tokens", "purge", database_url=database_url))
    stored = stored_digests(database_url)
    assert not doomed & (stored["access_tokens"] | stored["refresh_tokens"])


@pytest.mark.parametrize("raw", ["0", "abc"])
@pytest.mark.parametrize("backend", ["sqlite"])
def test_serve_refuses_a_bad_purge_interval_in_one_line(raw, database_url, tmp_path):
    """On SQLite only: the setting is checked before any database is opened."""
    result = run_cli(
        "serve",
        "--port",
        str(free_port()),
        database_url=database_url,
        env={"DEVICECONTROL_PURGE_INTERVAL": raw},
        cwd=tmp_path,
    )
    assert result.returncode == 1, f"exit {result.returncode}\n{result.stdout}\n{result.stderr}"
    assert result.stderr.count("\n") == 1, result.stderr
    assert "DEVICECONTROL_PURGE_INTERVAL" in result.stderr
    assert "Traceback" not in result.stderr
