"""Reads of the events' log for the streams, and the open streams' table. No rules here."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Any

from sqlalchemy import Row, delete, func, insert, or_, select, true, update

from devicecontrol.database.engine import Reader, Writer
from devicecontrol.database.tables import controllers, event_streams, events, users

EVENT_COLUMNS = (
    events.c.id,
    events.c.controller_id,
    events.c.kind,
    events.c.user_id,
    events.c.data,
)


async def position_and_controllers(
    connection: Reader, user_id: int, serial_number: str | None
) -> tuple[int, list[Row[Any]]]:
    """The log's newest position and the user's controllers (one, with ``serial_number``)
    with their ``online``, read in one statement: the controllers are as they were at that
    position, since an owner change and its events commit together."""
    newest = select(func.coalesce(func.max(events.c.id), 0).label("position")).subquery()
    conditions = [controllers.c.user_id == user_id]
    if serial_number is not None:
        conditions.append(controllers.c.serial_number == serial_number)
    owned = (
        select(controllers.c.id, controllers.c.serial_number, controllers.c.online)
        .where(*conditions)
        .subquery()
    )
    query = select(
        newest.c.position, owned.c.id, owned.c.serial_number, owned.c.online
    ).select_from(newest.outerjoin(owned, true()))
    rows = list(await connection.execute(query))
    position = int(rows[0].position) if rows else 0
    return position, [row for row in rows if row.id is not None]


async def events_after(connection: Reader, position: int, limit: int) -> list[Row[Any]]:
    """Every event after ``position``, oldest first (a process's fan-out)."""
    query = select(*EVENT_COLUMNS).where(events.c.id > position).order_by(events.c.id).limit(limit)
    return list(await connection.execute(query))


async def events_between(
    connection: Reader,
    after: int,
    upto: int,
    controller_ids: Collection[int],
    user_id: int,
    limit: int,
) -> list[Row[Any]]:
    """One stream's events in (after, upto]: its controllers', and its user's owner
    changes (a resumed stream's catch-up), oldest first."""
    mine = events.c.user_id == user_id
    condition = (
        or_(events.c.controller_id.in_(sorted(controller_ids)), mine) if controller_ids else mine
    )
    query = (
        select(*EVENT_COLUMNS)
        .where(events.c.id > after, events.c.id <= upto, condition)
        .order_by(events.c.id)
        .limit(limit)
    )
    return list(await connection.execute(query))


async def oldest_position(connection: Reader) -> int | None:
    oldest: int | None = (await connection.execute(select(func.min(events.c.id)))).scalar()
    return oldest


# --- the open streams ----------------------------------------------------------------------


async def lock_user(connection: Writer, user_id: int) -> None:
    """Hold the user's row until the transaction ends (PostgreSQL; SQLite's writes are
    serial): two workers cannot both take the last free stream."""
    await connection.execute(select(users.c.id).where(users.c.id == user_id).with_for_update())


async def count_open(connection: Writer, user_id: int, fresh_since: datetime) -> int:
    query = (
        select(func.count())
        .select_from(event_streams)
        .where(event_streams.c.user_id == user_id, event_streams.c.seen_at >= fresh_since)
    )
    count: int = (await connection.execute(query)).scalar_one()
    return count


async def forget_stale(connection: Writer, user_id: int, fresh_since: datetime) -> None:
    await connection.execute(
        delete(event_streams).where(
            event_streams.c.user_id == user_id, event_streams.c.seen_at < fresh_since
        )
    )


async def insert_open(connection: Writer, user_id: int, now: datetime) -> int:
    result = await connection.execute(
        insert(event_streams).values(user_id=user_id, seen_at=now).returning(event_streams.c.id)
    )
    slot: int = result.scalar_one()
    return slot


async def delete_open(connection: Writer, slot_ids: Collection[int]) -> None:
    await connection.execute(delete(event_streams).where(event_streams.c.id.in_(sorted(slot_ids))))


async def touch_open(connection: Writer, slot_ids: Collection[int], now: datetime) -> None:
    await connection.execute(
        update(event_streams).where(event_streams.c.id.in_(sorted(slot_ids))).values(seen_at=now)
    )
