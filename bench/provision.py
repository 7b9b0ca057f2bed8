"""Fill a fresh database fast: the real migrations, then Core executemany in big batches.

One precomputed argon2 hash serves every user (hashing a million passwords would take
days), and the token holders' access and refresh tokens are inserted as digests, exactly
as login would store them, so that wrk can present the tokens themselves.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from sqlalchemy import Table, insert, text

from bench.fleet import Fleet, serial_number, username
from devicecontrol.auth import tokens
from devicecontrol.auth.passwords import hash_password
from devicecontrol.clock import utcnow
from devicecontrol.database.engine import Database
from devicecontrol.database.migrate import upgrade_database
from devicecontrol.database.tables import (
    access_tokens,
    clients,
    controller_assignments,
    controllers,
    latest_readings,
    readings,
    refresh_tokens,
)
from devicecontrol.database.tables import users as users_table
from devicecontrol.geo import find_place
from devicecontrol.users.repository import find_or_create_country

BATCH_ROWS = 20_000
CLIENT_ID = "bench-app"
CLIENT_SECRET = "bench-client-secret-not-for-production"  # noqa: S105 (benchmark data only)
PASSWORD = "bench-password"  # noqa: S105 (benchmark data only)
TOKEN_TTL = timedelta(days=1)
COUNTRY = ("BG", "Sofia")
# tables given explicit ids: PostgreSQL's sequences must then skip past them
_ID_TABLES = (
    "countries", "clients", "users", "controllers", "controller_assignments", "readings",
    "refresh_tokens", "access_tokens",
)  # fmt: skip
# what an owned controller last reported, as a device of its type would
READINGS = {
    "melissa": '{"temp":21.5,"humidity":40.2,"raw_temperature":21500,"raw_humidity":40200}',
    "smart_plug": '{"relay_state":"on","power":[12.5]}',
}


def controller_type(index: int) -> str:
    return "melissa" if index % 2 else "smart_plug"


@dataclass(slots=True)
class Provisioned:
    """What the scenarios need to address the fleet, and how long filling it took."""

    fleet: Fleet
    access_tokens: dict[int, list[str]] = field(default_factory=dict)  # several per holder
    refresh_tokens: dict[int, str] = field(default_factory=dict)
    seconds: float = 0.0


def _batches(rows: Iterator[dict[str, Any]], size: int = BATCH_ROWS) -> Iterator[list[dict]]:
    batch: list[dict[str, Any]] = []
    for row in rows:
        batch.append(row)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


async def _insert_all(database: Database, table: Table, rows: Iterator[dict[str, Any]]) -> None:
    for batch in _batches(rows):
        async with database.write() as connection:
            await connection.execute(insert(table), batch)


async def provision(database_url: str, fleet: Fleet) -> Provisioned:
    """Migrate and fill an empty database; returns the tokens handed to the token holders."""
    started = time.perf_counter()
    database = Database(database_url, command_timeout_s=None)
    try:
        await upgrade_database(database)
        result = Provisioned(fleet)
        await _fill(database, result)
        if not database.is_sqlite:
            await _advance_sequences(database)
    finally:
        await database.dispose()
    result.seconds = time.perf_counter() - started
    return result


async def _fill(database: Database, result: Provisioned) -> None:
    fleet, now = result.fleet, utcnow()
    place = find_place(*COUNTRY)
    password_hash = hash_password(PASSWORD)
    async with database.write() as connection:
        country_id = await find_or_create_country(connection, place)
        await connection.execute(
            insert(clients).values(
                id=1,
                client_id=CLIENT_ID,
                secret_digest=tokens.digest(CLIENT_SECRET),
                created_at=now,
            )
        )
    await _insert_all(
        database,
        users_table,
        (
            {
                "id": user_id,
                "username": username(user_id),
                "username_key": username(user_id),
                "password_hash": password_hash,
                "firstname": "Bench",
                "lastname": f"User {user_id}",
                "phone": None,
                "country_id": country_id,
                "created_at": now,
            }
            for user_id in range(1, fleet.users + 1)
        ),
    )
    await _insert_all(
        database,
        controllers,
        (
            {
                "id": index + 1,
                "serial_number": serial_number(index),
                "mac": f"{index:012X}",
                "type": controller_type(index),
                "name": f"Controller {index}",
                "firmware_version": "1.2.3",
                "brand_id": 1,
                "device_group": "",
                "room_id": None,
                "online": bool(index % 3),
                "claim_code_digest": None,
                "user_id": fleet.owner(index),
                "created_at": now,
            }
            for index in range(fleet.controllers)
        ),
    )
    await _fill_ownership(database, fleet, now)
    holders = range(1, fleet.token_holders + 1)
    result.refresh_tokens = {user_id: tokens.new_token() for user_id in holders}
    result.access_tokens = {
        user_id: [tokens.new_token() for _ in range(fleet.tokens_per_holder)] for user_id in holders
    }
    issued = [(user_id, token) for user_id, held in result.access_tokens.items() for token in held]
    await _insert_all(
        database,
        refresh_tokens,
        (
            {
                "id": user_id,
                "digest": tokens.digest(token),
                "user_id": user_id,
                "client_pk": 1,
                "created_at": now,
                "expires_at": now + TOKEN_TTL,
                "revoked_at": None,
            }
            for user_id, token in result.refresh_tokens.items()
        ),
    )
    await _insert_all(
        database,
        access_tokens,
        (
            {
                "id": number,
                "digest": tokens.digest(token),
                "user_id": user_id,
                "client_pk": 1,
                "refresh_token_id": user_id,
                "created_at": now,
                "expires_at": now + TOKEN_TTL,
                "revoked_at": None,
            }
            for number, (user_id, token) in enumerate(issued, start=1)
        ),
    )


async def _fill_ownership(database: Database, fleet: Fleet, now: Any) -> None:
    """Each owned controller's active assignment record and its latest reading (record and
    reading ids are the controller's), as claiming it and a device reporting would leave."""
    owned = [index for index in range(fleet.controllers) if fleet.owner(index) is not None]
    await _insert_all(
        database,
        controller_assignments,
        (
            {
                "id": index + 1,
                "controller_id": index + 1,
                "user_id": fleet.owner(index),
                "serial_number": serial_number(index),
                "mac": f"{index:012X}",
                "firmware_version": "1.2.3",
                "name": f"Controller {index}",
                "type": controller_type(index),
                "device_group": "",
                "status_push": 0,
                "room_id": None,
                "created_at": now,
                "assigned_at": now,
                "deleted_at": None,
            }
            for index in owned
        ),
    )
    reading_rows = [
        {
            "id": index + 1,
            "controller_id": index + 1,
            "assignment_id": index + 1,
            "payload": READINGS[controller_type(index)],
            "created_at": now,
        }
        for index in owned
    ]
    await _insert_all(database, readings, iter(reading_rows))
    await _insert_all(
        database,
        latest_readings,
        (
            {"reading_id": row["id"], **{k: v for k, v in row.items() if k != "id"}}
            for row in reading_rows
        ),
    )


async def _advance_sequences(database: Database) -> None:
    async with database.write() as connection:
        for table in _ID_TABLES:
            await connection.execute(
                text(
                    f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "  # noqa: S608 (constant names)
                    f"(SELECT coalesce(max(id), 1) FROM {table}))"
                )
            )
        await connection.execute(text("ANALYZE"))
