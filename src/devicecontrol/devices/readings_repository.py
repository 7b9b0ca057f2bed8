"""Queries for readings: the history, and the latest reading kept apart. No rules here."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Row, delete, func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from devicecontrol.db import Reader
from devicecontrol.tables import latest_readings, readings


async def insert_reading(
    connection: AsyncConnection,
    *,
    controller_id: int,
    assignment_id: int | None,
    payload: str,
    now: datetime,
) -> None:
    """Store a reading and make it the controller's latest."""
    reading_id = (
        await connection.execute(
            insert(readings)
            .values(
                controller_id=controller_id,
                assignment_id=assignment_id,
                payload=payload,
                created_at=now,
            )
            .returning(readings.c.id)
        )
    ).scalar_one()
    latest = {
        "reading_id": reading_id,
        "assignment_id": assignment_id,
        "payload": payload,
        "created_at": now,
    }
    updated = await connection.execute(
        update(latest_readings)
        .where(latest_readings.c.controller_id == controller_id)
        .values(**latest)
    )
    if not updated.rowcount:
        await connection.execute(
            insert(latest_readings).values(controller_id=controller_id, **latest)
        )


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
    return (await connection.execute(query)).scalar_one()


async def list_readings(
    connection: Reader,
    controller_id: int,
    assignment_id: int,
    *,
    since: datetime | None,
    until: datetime | None,
    offset: int,
    limit: int,
) -> list[Row]:
    query = (
        select(readings.c.payload, readings.c.created_at)
        .where(*_readings_of(controller_id, assignment_id, since, until))
        .order_by(readings.c.id.desc())
        .offset(offset)
        .limit(limit)
    )
    return list(await connection.execute(query))


async def delete_readings_before(connection: AsyncConnection, cutoff: datetime, limit: int) -> int:
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
