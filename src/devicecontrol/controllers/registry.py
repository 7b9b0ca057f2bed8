"""Set-based queries over the whole registry, for the operators' commands. No rules here.

Bulk provisioning looks serials and owners up a chunk at a time and inserts with
executemany; export reads in id order by keyset (``id > last``), so that neither holds a
whole fleet in memory nor runs one query per controller.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import DateTime, Integer, Row, func, insert, literal, select
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.elements import ColumnElement

from devicecontrol.db import Reader
from devicecontrol.tables import controller_assignments, controllers, users

# bound parameters per IN list: far below SQLite's (32766) and PostgreSQL's (65535) limits
LOOKUP_CHUNK = 1000

# what the operators see of a controller: every column but the claim code's digest
_OPERATOR_COLUMNS = (
    controllers.c.id,
    controllers.c.serial_number,
    controllers.c.mac,
    controllers.c.type,
    controllers.c.name,
    controllers.c.firmware_version,
    controllers.c.brand_id,
    controllers.c.device_group,
    controllers.c.room_id,
    controllers.c.online,
    controllers.c.created_at,
    controllers.c.claim_code_digest.is_not(None).label("has_claim_code"),
    users.c.username.label("owner"),
)
_WITH_OWNER = controllers.outerjoin(users, users.c.id == controllers.c.user_id)


def _chunks(values: Sequence[str]) -> Iterable[Sequence[str]]:
    for start in range(0, len(values), LOOKUP_CHUNK):
        yield values[start : start + LOOKUP_CHUNK]


async def controllers_by_serial(connection: Reader, serials: Sequence[str]) -> dict[str, Row]:
    """Every column of the registered controllers among ``serials``."""
    found: dict[str, Row] = {}
    for chunk in _chunks(serials):
        query = select(controllers).where(controllers.c.serial_number.in_(chunk))
        found.update({row.serial_number: row for row in await connection.execute(query)})
    return found


async def accounts_by_key(connection: Reader, keys: Sequence[str]) -> dict[str, Row]:
    """``(id, active)`` of the accounts among these username keys, disabled ones included."""
    found: dict[str, Row] = {}
    for chunk in _chunks(keys):
        query = select(
            users.c.username_key, users.c.id, users.c.disabled_at.is_(None).label("active")
        ).where(users.c.username_key.in_(chunk))
        found.update({row.username_key: row for row in await connection.execute(query)})
    return found


async def insert_controllers(connection: AsyncConnection, rows: list[dict[str, Any]]) -> None:
    """One executemany, in the list's order: ids follow it (registration order)."""
    if rows:
        await connection.execute(insert(controllers), rows)


async def insert_owners_records(
    connection: AsyncConnection, serials: Sequence[str], now: datetime
) -> None:
    """The active assignment record of each of these owned controllers, from its own row."""
    columns = (
        "controller_id", "user_id", "serial_number", "mac", "firmware_version", "name",
        "type", "device_group", "status_push", "room_id", "created_at", "assigned_at",
    )  # fmt: skip
    for chunk in _chunks(serials):
        source = (
            select(
                controllers.c.id,
                controllers.c.user_id,
                controllers.c.serial_number,
                controllers.c.mac,
                controllers.c.firmware_version,
                controllers.c.name,
                controllers.c.type,
                controllers.c.device_group,
                literal(0, Integer),
                controllers.c.room_id,
                literal(now, DateTime),
                literal(now, DateTime),
            )
            .where(controllers.c.serial_number.in_(chunk), controllers.c.user_id.is_not(None))
            .order_by(controllers.c.id)
        )
        await connection.execute(insert(controller_assignments).from_select(columns, source))


async def export_page(connection: Reader, *, after_id: int, limit: int) -> list[Row]:
    """The next ``limit`` controllers in registration order, with their owner's username."""
    query = (
        select(*_OPERATOR_COLUMNS)
        .select_from(_WITH_OWNER)
        .where(controllers.c.id > after_id)
        .order_by(controllers.c.id)
        .limit(limit)
    )
    return list((await connection.execute(query)).all())


def serial_starts_with(prefix: str) -> ColumnElement[bool]:
    """Exact and case-sensitive on both engines (SQLite's LIKE ignores ASCII case)."""
    return func.substr(controllers.c.serial_number, 1, len(prefix)) == prefix


async def list_filtered(
    connection: Reader, conditions: Sequence[ColumnElement[bool]], *, limit: int
) -> tuple[list[Row], int]:
    """The first ``limit`` matches in registration order, and how many match in all."""
    query = (
        select(*_OPERATOR_COLUMNS)
        .select_from(_WITH_OWNER)
        .where(*conditions)
        .order_by(controllers.c.id)
        .limit(limit)
    )
    total = select(func.count()).select_from(controllers).where(*conditions)
    rows = list((await connection.execute(query)).all())
    return rows, (await connection.execute(total)).scalar_one()
