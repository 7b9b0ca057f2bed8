"""Queries for readings: the history, and the latest reading kept apart. No rules here."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    DateTime,
    Row,
    String,
    bindparam,
    delete,
    func,
    insert,
    literal,
    select,
    tuple_,
    type_coerce,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite

from devicecontrol.database.engine import LongReader, Reader, Writer
from devicecontrol.database.tables import (
    controllers,
    latest_readings,
    reading_fields,
    readings,
)
from devicecontrol.devices.repository import ACTIVE_ASSIGNMENT, seen_not_after


@dataclass(frozen=True, slots=True)
class ArrivedReading:
    """A reading the link accepted: its controller, its stored JSON and when it arrived."""

    controller_id: int
    payload: str
    arrived_at: datetime


def _readings_of(controller_id: int, assignment_id: int, since: Any, until: Any) -> list[Any]:
    conditions = [
        readings.c.controller_id == controller_id,
        readings.c.assignment_id == assignment_id,
    ]
    if since is not None:
        conditions.append(readings.c.created_at >= since)
    if until is not None:
        conditions.append(readings.c.created_at < until)
    return conditions


async def count_readings(
    connection: Reader,
    controller_id: int,
    assignment_id: int,
    *,
    since: datetime | None,
    until: datetime | None,
) -> int:
    query = (
        select(func.count())
        .select_from(readings)
        .where(*_readings_of(controller_id, assignment_id, since, until))
    )
    count: int = (await connection.execute(query)).scalar_one()
    return count


async def list_readings(
    connection: Reader,
    controller_id: int,
    assignment_id: int,
    *,
    since: datetime | None,
    until: datetime | None,
    offset: int,
    limit: int,
) -> list[Row[Any]]:
    """A page of the history, newest first by arrival: several links store one device's
    readings side by side, so ``id`` (storing order) is not arrival order; ``id`` only
    breaks ties, which keeps the order total and the pages from overlapping."""
    query = (
        select(readings.c.payload, readings.c.created_at)
        .where(*_readings_of(controller_id, assignment_id, since, until))
        .order_by(readings.c.created_at.desc(), readings.c.id.desc())
        .offset(offset)
        .limit(limit)
    )
    return list(await connection.execute(query))


async def delete_readings_before(connection: Writer, cutoff: datetime, limit: int) -> int:
    """Delete up to ``limit`` readings older than ``cutoff`` (never a controller's latest)."""
    batch = (
        select(readings.c.id)
        .where(
            readings.c.created_at < cutoff,
            readings.c.id.not_in(select(latest_readings.c.reading_id)),
        )
        .limit(limit)
        .scalar_subquery()
    )
    result = await connection.execute(delete(readings).where(readings.c.id.in_(batch)))
    return result.rowcount


async def recent_payloads(connection: Reader, controller_id: int, limit: int) -> list[str]:
    """The controller's ``limit`` newest stored readings, as stored (a redelivery check)."""
    query = (
        select(readings.c.payload)
        .where(readings.c.controller_id == controller_id)
        .order_by(readings.c.id.desc())
        .limit(limit)
    )
    return list((await connection.execute(query)).scalars())


LATEST_FIELDS = ("reading_id", "assignment_id", "payload", "created_at")


async def insert_readings(connection: Writer, arrived: Sequence[ArrivedReading]) -> None:
    """Store a batch of readings (in arrival order) and make each controller's newest its
    latest: one multi-row INSERT for the history, one upsert of the latest readings and one
    update of ``last_seen``, each with all the batch's controllers at once.

    The latest reading and ``last_seen`` only move forward in arrival time: several link
    processes store one device's readings side by side, and one that arrived earlier may
    commit later; it joins the history, and leaves the newer one latest.

    The ownership is looked up in the same transaction, so a reading and a hand-over are
    ordered by arrival, never by second-precision timestamps.
    """
    controller_ids = sorted({a.controller_id for a in arrived})
    owned = await connection.execute(OWNERS_OF, {"ids": controller_ids})
    owners: dict[int, int | None] = {row.id: row.assignment_id for row in owned}
    rows: list[dict[str, Any]] = [
        {
            "controller_id": a.controller_id,
            "assignment_id": owners.get(a.controller_id),
            "payload": a.payload,
            "created_at": a.arrived_at,
        }
        for a in arrived
    ]
    ids = (await connection.execute(READINGS_INSERT, rows)).scalars()
    newest: dict[int, dict[str, Any]] = {}
    for row, reading_id in zip(rows, ids, strict=True):
        newest[row["controller_id"]] = {**row, "reading_id": reading_id}
    await connection.execute(
        _latest_upsert(connection.dialect.name),
        [
            {name: row[name] for name in ("controller_id", *LATEST_FIELDS)}
            for row in newest.values()
        ],
    )
    await connection.execute(
        LAST_SEEN_UPDATE,
        [{"b_id": cid, "b_last_seen": row["created_at"]} for cid, row in newest.items()],
    )


# built once: a batch of readings is written every few milliseconds, and building the
# upsert (its ``excluded`` columns) costs more than running it (py-spy)
OWNERS_OF = select(controllers.c.id, ACTIVE_ASSIGNMENT.label("assignment_id")).where(
    controllers.c.id.in_(bindparam("ids", expanding=True))
)
READINGS_INSERT = insert(readings).returning(readings.c.id, sort_by_parameter_order=True)
_SEEN = bindparam("b_last_seen", type_=DateTime)
LAST_SEEN_UPDATE = (
    update(controllers)
    .where(controllers.c.id == bindparam("b_id"), seen_not_after(_SEEN))
    .values(last_seen=_SEEN)
)


@functools.cache
def _latest_upsert(dialect_name: str) -> Any:
    """Each controller's newest reading of a batch becomes its latest (an upsert), unless
    the one stored arrived later."""
    dialect_insert = postgresql.insert if dialect_name == "postgresql" else sqlite.insert
    upsert = dialect_insert(latest_readings)
    return upsert.on_conflict_do_update(
        index_elements=[latest_readings.c.controller_id],
        set_={name: upsert.excluded[name] for name in LATEST_FIELDS},
        where=latest_readings.c.created_at <= upsert.excluded.created_at,
    )


async def readings_in_order(
    connection: LongReader,
    controller_id: int,
    assignment_id: int,
    *,
    since: datetime,
    until: datetime,
    after: tuple[Any, int] | None,
    limit: int,
    dialect: str,
) -> list[Row[Any]]:
    """Up to ``limit`` readings oldest first (``id``, ``payload``, ``created`` as the API
    writes it, ``position``), from just after ``after`` (a row's position and id): an
    export reads its range in slices, never holding a connection while a slow client
    takes what it was sent. The time comes as text from the database: parsing 40,000
    SQLite timestamps into datetimes only to write them back out cost a third of an
    export."""
    if dialect == "postgresql":
        position: Any = readings.c.created_at
        created = func.to_char(readings.c.created_at, "YYYY-MM-DD HH24:MI:SS")
    else:  # stored as text, 'YYYY-MM-DD HH:MM:SS.ffffff': compared and cut as text
        position = type_coerce(readings.c.created_at, String)
        created = func.substr(readings.c.created_at, 1, 19)
    conditions = _readings_of(controller_id, assignment_id, since, until)
    if after is not None:
        conditions.append(
            tuple_(position, readings.c.id) > tuple_(literal(after[0], position.type), after[1])
        )
    query = (
        select(
            readings.c.id,
            readings.c.payload,
            created.label("created"),
            position.label("position"),
        )
        .where(*conditions)
        .order_by(readings.c.created_at, readings.c.id)
        .limit(limit)
    )
    return await connection.execute_long(query)


async def field_names_of(connection: Writer, controller_ids: Sequence[int]) -> dict[int, set[str]]:
    """The field names each controller has been let report (``reading_fields``)."""
    query = select(reading_fields.c.controller_id, reading_fields.c.name).where(
        reading_fields.c.controller_id.in_(controller_ids)
    )
    known: dict[int, set[str]] = {controller_id: set() for controller_id in controller_ids}
    for row in await connection.execute(query):
        known[row.controller_id].add(row.name)
    return known


async def add_field_names(connection: Writer, names: Sequence[tuple[int, str]]) -> None:
    """Let each (controller, name) be reported; one another link added meanwhile stays."""
    if not names:
        return
    dialect_insert = postgresql.insert if connection.dialect.name == "postgresql" else sqlite.insert
    rows = [{"controller_id": controller_id, "name": name} for controller_id, name in names]
    await connection.execute(dialect_insert(reading_fields).on_conflict_do_nothing(), rows)
