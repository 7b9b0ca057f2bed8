"""`devicecontrol tokens purge` and housekeeping.purge: exactly the dead rows go."""

from __future__ import annotations

import json
import secrets
from datetime import datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import event, insert, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from devicecontrol.auth import tokens
from devicecontrol.clock import utcnow
from devicecontrol.config import Settings, ThrottleRule
from devicecontrol.database.tables import (
    access_tokens,
    clients,
    commands,
    controllers,
    readings,
    refresh_tokens,
    throttle_failures,
)
from devicecontrol.devices.commands import repository as commands_repository
from devicecontrol.devices.readings import repository as readings_repository
from devicecontrol.housekeeping import purge as housekeeping
from devicecontrol.runtime import Runtime
from tests.auth.oauth import account, post_renew
from tests.cli.support import (
    assert_one_line_error,
    assert_succeeded,
    cli,
    cli_process,
    rows,
    snapshot,
)
from tests.factories import CLIENT_ID, CLIENT_SECRET, login, make_controller, me_status

HOUR = timedelta(hours=1)
DAY = timedelta(days=1)


class Seed:
    """Token and throttle rows written straight into the tables, with chosen times."""

    def __init__(self, runtime: Runtime, user_id: int, client_pk: int) -> None:
        self.runtime = runtime
        self.user_id = user_id
        self.client_pk = client_pk

    @classmethod
    async def create(cls, runtime: Runtime) -> Seed:
        user_id = await account(runtime)
        async with runtime.database.read() as connection:
            query = select(clients.c.id).where(clients.c.client_id == CLIENT_ID)
            client_pk = (await connection.execute(query)).scalar_one()
        return cls(runtime, user_id, client_pk)

    def _token_values(
        self, token: str, expires_at: datetime, revoked_at: datetime | None
    ) -> dict[str, Any]:
        return {
            "digest": tokens.digest(token),
            "user_id": self.user_id,
            "client_pk": self.client_pk,
            "created_at": min(expires_at, utcnow()) - HOUR,
            "expires_at": expires_at,
            "revoked_at": revoked_at,
        }

    async def refresh(
        self, expires_at: datetime, revoked_at: datetime | None = None
    ) -> tuple[str, int]:
        token = tokens.new_token()
        async with self.runtime.database.write() as connection:
            result = await connection.execute(
                insert(refresh_tokens)
                .values(self._token_values(token, expires_at, revoked_at))
                .returning(refresh_tokens.c.id)
            )
            return token, result.scalar_one()

    async def access(
        self, refresh_id: int | None, expires_at: datetime, revoked_at: datetime | None = None
    ) -> str:
        token = tokens.new_token()
        values = self._token_values(token, expires_at, revoked_at)
        async with self.runtime.database.write() as connection:
            await connection.execute(
                insert(access_tokens).values(**values, refresh_token_id=refresh_id)
            )
        return token

    async def failures(self, *created_at: datetime) -> None:
        async with self.runtime.database.write() as connection:
            await connection.execute(
                insert(throttle_failures),
                [
                    {
                        "scope": "login_username",
                        "subject_digest": tokens.digest(f"subject-{n}"),
                        "created_at": moment,
                    }
                    for n, moment in enumerate(created_at)
                ],
            )


async def new_controller(runtime: Runtime, serial_number: str) -> int:
    await make_controller(runtime, serial_number)
    [row] = await rows(runtime, controllers, controllers.c.serial_number == serial_number)
    return row.id


async def seed_readings(runtime: Runtime, controller_id: int, *arrived: datetime) -> None:
    """Readings stored as the link stores them, arriving in this order: the last is the
    controller's latest."""
    async with runtime.database.write() as connection:
        await readings_repository.insert_readings(
            connection,
            [
                readings_repository.ArrivedReading(controller_id, json.dumps({"n": n}), moment)
                for n, moment in enumerate(arrived)
            ],
        )


async def reading_times(runtime: Runtime, controller_id: int) -> list[datetime]:
    kept = await rows(runtime, readings, readings.c.controller_id == controller_id)
    return [row.created_at for row in kept]


async def seed_command(
    runtime: Runtime, controller_id: int, status: str, expires_at: datetime
) -> str:
    """A command row in ``status`` with this expiry, written straight into the table."""
    created = expires_at - HOUR
    finished = status in ("succeeded", "failed")
    async with runtime.database.write() as connection:
        row = await commands_repository.insert_command(
            connection,
            {
                "public_id": secrets.token_hex(12),
                "controller_id": controller_id,
                "name": "turn_on",
                "params": "{}",
                "status": status,
                "created_at": created,
                "sent_at": created if status != "queued" else None,
                "completed_at": created + timedelta(seconds=1) if finished else None,
                "expires_at": expires_at,
            },
        )
    return row.public_id


async def command_states(runtime: Runtime) -> dict[str, tuple[str, datetime | None]]:
    """public id -> (stored status, completed_at)."""
    return {row.public_id: (row.status, row.completed_at) for row in await rows(runtime, commands)}


async def digests(runtime: Runtime, table: Any) -> set[str]:
    return {row.digest for row in await rows(runtime, table)}


def digest_set(*secrets: str) -> set[str]:
    return {tokens.digest(secret) for secret in secrets}


def purged(access: int, refresh: int, throttle: int, readings: int = 0, expired: int = 0) -> str:
    """What `tokens purge` prints for these counts."""
    return (
        f"Purged {access} access tokens, {refresh} refresh tokens, {throttle} throttle records "
        f"and {readings} readings; stored expired for {expired} overdue commands.\n"
    )


# --- the command line -------------------------------------------------------------------


async def test_tokens_purge_deletes_exactly_the_dead_rows_and_prints_the_counts(
    database_url, runtime, client
):
    seed = await Seed.create(runtime)
    now = utcnow()
    live_refresh, live_refresh_id = await seed.refresh(now + HOUR)
    live_access = await seed.access(live_refresh_id, now + HOUR)
    expired_access = await seed.access(live_refresh_id, now - timedelta(seconds=5))
    revoked_access = await seed.access(live_refresh_id, now + HOUR, revoked_at=now - HOUR)
    # a renew late in a refresh token's life: the access token outlives its refresh token
    outlived_refresh, outlived_refresh_id = await seed.refresh(now - HOUR)
    late_access = await seed.access(outlived_refresh_id, now + HOUR)
    # dead refresh tokens nothing live refers to: one revoked, one expired with a dead child
    revoked_refresh, _ = await seed.refresh(now + HOUR, revoked_at=now - HOUR)
    expired_refresh, expired_refresh_id = await seed.refresh(now - 2 * HOUR)
    dead_child = await seed.access(expired_refresh_id, now - 2 * HOUR)
    old, recent = now - timedelta(seconds=1000), now - timedelta(seconds=600)
    await seed.failures(old, now - timedelta(days=3), recent, now)

    result = await cli("tokens", "purge", database_url=database_url)

    assert_succeeded(result)
    assert result.stdout == purged(3, 2, 2), result.stdout
    assert result.stderr == ""
    assert await digests(runtime, access_tokens) == digest_set(live_access, late_access)
    assert await digests(runtime, refresh_tokens) == digest_set(live_refresh, outlived_refresh)
    assert [row.created_at for row in await rows(runtime, throttle_failures)] == [recent, now]
    # what is left still works
    assert await me_status(client, live_access) == 200
    assert await me_status(client, late_access) == 200
    assert (await post_renew(client, live_refresh)).status_code == 200
    for gone in (expired_access, revoked_access, dead_child):
        assert await me_status(client, gone) == 401
    for gone in (revoked_refresh, expired_refresh, outlived_refresh):
        assert (await post_renew(client, gone)).status_code == 400


async def test_an_outlived_refresh_token_goes_in_the_first_purge_after_its_last_access_token(
    database_url, runtime
):
    seed = await Seed.create(runtime)
    now = utcnow()
    _, refresh_id = await seed.refresh(now - HOUR)
    late_access = await seed.access(refresh_id, now + HOUR)

    first = await cli("tokens", "purge", database_url=database_url)
    assert_succeeded(first)
    assert first.stdout == purged(0, 0, 0)
    assert len(await rows(runtime, refresh_tokens)) == 1

    async with runtime.database.write() as connection:
        await connection.execute(
            update(access_tokens)
            .where(access_tokens.c.digest == tokens.digest(late_access))
            .values(expires_at=now - timedelta(seconds=1))
        )
    second = await cli("tokens", "purge", database_url=database_url)
    assert_succeeded(second)
    assert second.stdout == purged(1, 1, 0)
    assert await rows(runtime, access_tokens) == []
    assert await rows(runtime, refresh_tokens) == []


async def test_tokens_purge_of_tokens_issued_through_the_app(database_url, runtime, client):
    """Real logins, aged by UPDATE: the login and renew rows are what the purge sees."""
    await account(runtime)
    expired, revoked, live = [await login(client) for _ in range(3)]
    past = utcnow() - timedelta(seconds=1)
    async with runtime.database.write() as connection:
        for table in (access_tokens, refresh_tokens):
            await connection.execute(
                update(table)
                .where(
                    table.c.digest.in_(
                        digest_set(expired["access_token"], expired["refresh_token"])
                    )
                )
                .values(expires_at=past)
            )
    revoke = await client.post(
        "/v1/auth/revoke",
        json={
            "client_id": CLIENT_ID,
            "client_secret": CLIENT_SECRET,
            "token": revoked["refresh_token"],
        },
    )
    assert revoke.status_code == 200, revoke.text

    result = await cli("tokens", "purge", database_url=database_url)

    assert_succeeded(result)
    assert result.stdout == purged(2, 2, 0)
    assert await digests(runtime, access_tokens) == digest_set(live["access_token"])
    assert await digests(runtime, refresh_tokens) == digest_set(live["refresh_token"])
    assert await me_status(client, live["access_token"]) == 200
    assert (await post_renew(client, live["refresh_token"])).status_code == 200


async def test_tokens_purge_on_an_empty_database_deletes_nothing(database_url, runtime):
    before = await snapshot(runtime)
    result = await cli("tokens", "purge", database_url=database_url)
    assert_succeeded(result)
    assert result.stdout == purged(0, 0, 0)
    assert await snapshot(runtime) == before


@pytest.mark.parametrize(
    ("url", "fragment"),
    [
        ("postgresql://postgres@127.0.0.1:1/nothing", "database unavailable"),
        ("sqlite:////nonexistent-directory/x/devicecontrol.db", "database unavailable"),
        ("mysql://root@127.0.0.1/devicecontrol", "unsupported database"),
        ("not a url at all", "not a database URL"),
    ],
)
async def test_tokens_purge_on_a_bad_database_url_fails_in_one_line(url, fragment, tmp_path):
    result = await cli("tokens", "purge", database_url=url, cwd=tmp_path)
    assert_one_line_error(result, fragment)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "variable, raw",
    [("DEVICECONTROL_THROTTLE_CLAIM_PER_USER", "10/0"), ("DEVICECONTROL_PURGE_INTERVAL", "abc")],
)
async def test_tokens_purge_with_a_bad_setting_fails_in_one_line_and_deletes_nothing(
    database_url, runtime, variable, raw
):
    seed = await Seed.create(runtime)
    await seed.access(None, utcnow() - HOUR)
    before = await snapshot(runtime)
    result = await cli_process(  # exit status 1 and one line on stderr of a real process
        "tokens",
        "purge",
        database_url=database_url,
        env={variable: raw},
    )
    assert_one_line_error(result, variable)
    assert await snapshot(runtime) == before


async def test_tokens_purge_deletes_readings_past_the_retention_but_never_a_latest_one(
    database_url, runtime
):
    now = utcnow()
    busy = await new_controller(runtime, "BUSY-1")
    silent = await new_controller(runtime, "SILENT-1")
    fresh = await new_controller(runtime, "FRESH-1")
    await seed_readings(runtime, busy, now - 40 * DAY, now - 31 * DAY, now - 29 * DAY, now - HOUR)
    # a device silent for longer than the retention keeps its last word
    await seed_readings(runtime, silent, now - 60 * DAY, now - 45 * DAY)
    await seed_readings(runtime, fresh, now - DAY)
    latest_before = (await snapshot(runtime))["latest_readings"]

    result = await cli("tokens", "purge", database_url=database_url)

    assert_succeeded(result)
    assert result.stdout == purged(0, 0, 0, readings=3), result.stdout
    assert await reading_times(runtime, busy) == [now - 29 * DAY, now - HOUR]
    assert await reading_times(runtime, silent) == [now - 45 * DAY]
    assert await reading_times(runtime, fresh) == [now - DAY]
    assert (await snapshot(runtime))["latest_readings"] == latest_before
    again = await cli("tokens", "purge", database_url=database_url)
    assert again.stdout == purged(0, 0, 0)


async def test_tokens_purge_reads_the_retention_from_its_variable(database_url, runtime):
    now = utcnow()
    plug = await new_controller(runtime, "PLUG-1")
    await seed_readings(runtime, plug, now - 10 * DAY, now - 6 * DAY, now)
    result = await cli(
        "tokens", "purge", database_url=database_url, env={"DEVICECONTROL_READING_RETENTION": "7"}
    )
    assert_succeeded(result)
    assert result.stdout == purged(0, 0, 0, readings=1)
    assert await reading_times(runtime, plug) == [now - 6 * DAY, now]


async def test_tokens_purge_stores_expired_for_overdue_unfinished_commands_only(
    database_url, runtime
):
    now = utcnow()
    plug = await new_controller(runtime, "PLUG-1")
    overdue_queued = await seed_command(runtime, plug, "queued", now - HOUR)
    overdue_sent = await seed_command(runtime, plug, "sent", now - timedelta(seconds=5))
    live_queued = await seed_command(runtime, plug, "queued", now + HOUR)
    live_sent = await seed_command(runtime, plug, "sent", now + HOUR)
    done = await seed_command(runtime, plug, "succeeded", now - HOUR)
    failed = await seed_command(runtime, plug, "failed", now - HOUR)
    before = await command_states(runtime)

    result = await cli("tokens", "purge", database_url=database_url)

    assert_succeeded(result)
    assert result.stdout == purged(0, 0, 0, expired=2), result.stdout
    after = await command_states(runtime)
    # an expired command completed when its time ran out, not when the purge noticed
    assert after[overdue_queued] == ("expired", now - HOUR)
    assert after[overdue_sent] == ("expired", now - timedelta(seconds=5))
    for unchanged in (live_queued, live_sent, done, failed):  # terminal states never change
        assert after[unchanged] == before[unchanged]
    again = await cli("tokens", "purge", database_url=database_url)
    assert again.stdout == purged(0, 0, 0)
    assert await command_states(runtime) == after


# --- housekeeping.purge directly --------------------------------------------------------


def count_deletes(runtime: Runtime, verb: str = "DELETE") -> list[tuple[str, int]]:
    """(table, rows changed) of every DELETE (or UPDATE) the engine runs from now on."""
    seen: list[tuple[str, int]] = []

    def after_cursor_execute(_conn, cursor, statement, _params, _context, _many):
        words = statement.split()
        if verb == "DELETE" and words[:2] == ["DELETE", "FROM"]:
            seen.append((words[2].strip('"'), cursor.rowcount))
        elif verb == "UPDATE" and words[:1] == ["UPDATE"]:
            seen.append((words[1].strip('"'), cursor.rowcount))

    engine = runtime.database.engine
    sync_engine = engine.sync_engine if isinstance(engine, AsyncEngine) else engine
    event.listen(sync_engine, "after_cursor_execute", after_cursor_execute)
    return seen


@pytest.mark.parametrize("dead", [9, 10], ids=["a multiple of the batch", "one over"])
async def test_purge_deletes_everything_dead_in_batches(runtime, monkeypatch, dead):
    monkeypatch.setattr(housekeeping, "PURGE_BATCH_ROWS", 3)
    seed = await Seed.create(runtime)
    now = utcnow()
    live_refresh, live_refresh_id = await seed.refresh(now + HOUR)
    live_access = [await seed.access(live_refresh_id, now + HOUR) for _ in range(4)]
    for n in range(dead):
        await seed.access(live_refresh_id, now - timedelta(seconds=n + 1))
        await seed.refresh(now + HOUR, revoked_at=now - timedelta(seconds=n))
    await seed.failures(*(now - timedelta(days=1, seconds=n) for n in range(dead)), now)
    plug = await new_controller(runtime, "PLUG-1")
    old = [now - 50 * DAY + timedelta(seconds=n) for n in range(dead)]
    await seed_readings(runtime, plug, *old, now - 40 * DAY)  # the latest is old too: kept
    deletes = count_deletes(runtime)

    report = await housekeeping.purge(runtime.database, runtime.settings, now)

    assert report == housekeeping.PurgeReport(dead, dead, dead, readings=dead)
    assert await digests(runtime, access_tokens) == digest_set(*live_access)
    assert await digests(runtime, refresh_tokens) == digest_set(live_refresh)
    assert [row.created_at for row in await rows(runtime, throttle_failures)] == [now]
    assert await reading_times(runtime, plug) == [now - 40 * DAY]
    # small transactions: no DELETE took more than a batch, and they add up to the report
    # (the events' log is trimmed too, by its own retention: tests/events/test_log.py)
    # (and so are the readings' rollups: tests/devices/test_readings_rollups.py)
    # (and the web app's expired sessions: tests/webapp/test_sessions.py)
    skipped = ("events", "reading_rollups", "web_sessions")
    per_table = {t: [n for t2, n in deletes if t2 == t] for t, _ in deletes if t not in skipped}
    assert set(per_table) == {"access_tokens", "refresh_tokens", "throttle_failures", "readings"}
    for counts in per_table.values():
        assert max(counts) == 3
        assert sum(counts) == dead
        assert len(counts) == dead // 3 + 1


@pytest.mark.parametrize("overdue", [6, 7], ids=["a multiple of the batch", "one over"])
async def test_purge_stores_expired_in_batches(runtime, monkeypatch, overdue):
    monkeypatch.setattr(housekeeping, "PURGE_BATCH_ROWS", 3)
    now = utcnow()
    plug = await new_controller(runtime, "PLUG-1")
    doomed = [await seed_command(runtime, plug, "queued", now - HOUR) for _ in range(overdue)]
    live = await seed_command(runtime, plug, "queued", now + HOUR)
    counts: list[int] = []  # what each transaction expired (an UPDATE ... RETURNING)
    expire = housekeeping.commands.expire_overdue

    async def counted(connection: Any, **options: Any) -> int:
        counts.append(await expire(connection, **options))
        return counts[-1]

    monkeypatch.setattr(housekeeping.commands, "expire_overdue", counted)

    report = await housekeeping.purge(runtime.database, runtime.settings, now)

    assert report.expired_commands == overdue
    states = await command_states(runtime)
    assert {states[public_id][0] for public_id in doomed} == {"expired"}
    assert states[live] == ("queued", None)
    assert max(counts) == 3
    assert sum(counts) == overdue
    assert len(counts) == overdue // 3 + 1


async def test_purge_keeps_a_reading_at_the_retention_cutoff_and_deletes_one_a_second_older(
    runtime, database_url
):
    now = utcnow()
    settings = Settings(database_url=database_url, reading_retention_days=2)
    cutoff = housekeeping.reading_cutoff(settings, now)
    assert cutoff == now - 2 * DAY
    plug = await new_controller(runtime, "PLUG-1")
    await seed_readings(runtime, plug, cutoff - timedelta(seconds=1), cutoff, now)
    report = await housekeeping.purge(runtime.database, settings, now)
    assert report.readings == 1
    assert await reading_times(runtime, plug) == [cutoff, now]


async def test_purge_treats_expiry_at_now_as_dead_and_a_second_later_as_live(runtime):
    seed = await Seed.create(runtime)
    now = utcnow()
    _, refresh_id = await seed.refresh(now + HOUR)
    at_now = await seed.access(refresh_id, now)
    a_second_later = await seed.access(refresh_id, now + timedelta(seconds=1))
    report = await housekeeping.purge(runtime.database, runtime.settings, now)
    assert (report.access_tokens, report.refresh_tokens) == (1, 0)
    assert await digests(runtime, access_tokens) == digest_set(a_second_later)
    assert tokens.digest(at_now) not in await digests(runtime, access_tokens)


async def test_purge_keeps_throttle_failures_inside_the_longest_window(runtime):
    seed = await Seed.create(runtime)
    now = utcnow()
    # the default windows: 900 s (the longest), 60 s
    await seed.failures(
        now - timedelta(seconds=901),
        now - timedelta(seconds=900),
        now - timedelta(seconds=899),
        now - timedelta(seconds=61),
        now,
    )
    report = await housekeeping.purge(runtime.database, runtime.settings, now)
    assert report.throttle_records == 2
    assert [row.created_at for row in await rows(runtime, throttle_failures)] == [
        now - timedelta(seconds=899),
        now - timedelta(seconds=61),
        now,
    ]


async def test_purge_keeps_throttle_failures_for_a_longer_configured_window(runtime, database_url):
    seed = await Seed.create(runtime)
    now = utcnow()
    await seed.failures(now - timedelta(seconds=3601), now - timedelta(seconds=1000))
    settings = Settings(database_url=database_url, throttle_claim_per_user=ThrottleRule(10, 3600))
    assert housekeeping.longest_throttle_window(settings) == timedelta(seconds=3600)
    report = await housekeeping.purge(runtime.database, settings, now)
    assert report.throttle_records == 1
    assert [row.created_at for row in await rows(runtime, throttle_failures)] == [
        now - timedelta(seconds=1000)
    ]


async def test_purge_twice_is_harmless(runtime):
    seed = await Seed.create(runtime)
    now = utcnow()
    _, refresh_id = await seed.refresh(now + HOUR)
    await seed.access(refresh_id, now - HOUR)
    first = await housekeeping.purge(runtime.database, runtime.settings, now)
    after_first = await snapshot(runtime)
    second = await housekeeping.purge(runtime.database, runtime.settings, now)
    assert first == housekeeping.PurgeReport(1, 0, 0)
    assert second == housekeeping.PurgeReport(0, 0, 0)
    assert await snapshot(runtime) == after_first
