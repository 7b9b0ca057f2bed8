"""Set-based queries over the whole registry, for the operators' commands (``controllers
import``, ``export`` and ``list``). No rules here: those are in bulk.py, export.py, listing.py.

Bulk provisioning looks serials and owners up a chunk at a time and inserts with
executemany; export reads in id order by keyset (``id > last``), so that neither holds a
whole fleet in memory nor runs one query per controller.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Row, func, insert, literal, select
from sqlalchemy.sql.elements import ColumnElement

from devicecontrol.controllers.repository import assignment_snapshot
from devicecontrol.database.engine import Reader, Writer
from devicecontrol.database.tables import controller_assignments, controllers, users

# bound parameters per IN list: far below SQLite's (32766) and PostgreSQL's (65535) limits
LOOKUP_CHUNK = 1000

# what the operators see of a controller: every column but the claim code's and the device
# secret's digests
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


async def insert_controllers(connection: Writer, rows: list[dict[str, Any]]) -> None:
    """One executemany, in the list's order: ids follow it (registration order)."""
    if rows:
        await connection.execute(insert(controllers), rows)


async def insert_owners_records(connection: Writer, serials: Sequence[str], now: datetime) -> None:
    """The active assignment record of each of these owned controllers, from its own row."""
    snapshot = assignment_snapshot(
        controllers.c, user_id=controllers.c.user_id, room_id=controllers.c.room_id, now=now
    )
    # the snapshot's constants (now, status_push) as typed SQL literals beside its columns
    values = [
        value
        if isinstance(value, ColumnElement)
        else literal(value, controller_assignments.c[name].type)
        for name, value in snapshot.items()
    ]
    for chunk in _chunks(serials):
        source = (
            select(*values)
            .where(controllers.c.serial_number.in_(chunk), controllers.c.user_id.is_not(None))
            .order_by(controllers.c.id)
        )
        await connection.execute(insert(controller_assignments).from_select(list(snapshot), source))


async def export_page(connection: Reader, *, after_id: int, limit: int) -> list[Row]:
    """The next ``limit`` controllers in registration order, with their owner's username
    and whether they have a device secret (never its digest)."""
    has_device_secret = controllers.c.device_secret_digest.is_not(None).label("has_device_secret")
    query = (
        select(*_OPERATOR_COLUMNS, has_device_secret)
        .select_from(_WITH_OWNER)
        .where(controllers.c.id > after_id)
        .order_by(controllers.c.id)
        .limit(limit)
    )
    return list((await connection.execute(query)).all())


def _serial_starts_with(prefix: str) -> ColumnElement[bool]:
    """Exact and case-sensitive on both engines (SQLite's LIKE ignores ASCII case)."""
    return func.substr(controllers.c.serial_number, 1, len(prefix)) == prefix


def _filters(
    *,
    owner_id: int | None,
    unowned: bool,
    type_: str | None,
    serial_prefix: str | None,
    online: bool | None,
) -> list[ColumnElement[bool]]:
    conditions: list[ColumnElement[bool]] = []
    if owner_id is not None:
        conditions.append(controllers.c.user_id == owner_id)
    if unowned:
        conditions.append(controllers.c.user_id.is_(None))
    if type_ is not None:
        conditions.append(controllers.c.type == type_)
    if serial_prefix is not None:
        conditions.append(_serial_starts_with(serial_prefix))
    if online is not None:
        conditions.append(controllers.c.online == online)
    return conditions


async def list_filtered(
    connection: Reader,
    *,
    owner_id: int | None,
    unowned: bool,
    type_: str | None,
    serial_prefix: str | None,
    online: bool | None,
    limit: int,
) -> tuple[list[Row], int]:
    """The first ``limit`` matches in registration order, and how many match in all.

    Each filter left at None (``unowned`` at False) matches every controller.
    """
    conditions = _filters(
        owner_id=owner_id,
        unowned=unowned,
        type_=type_,
        serial_prefix=serial_prefix,
        online=online,
    )
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
