"""Queries that roll readings up by quarter hour into ``reading_rollups``, and keep track of
how far they have come. No rules here: when a quarter hour is rolled up is ``rolling.py``'s.

One statement per kind of row, for every ownership in a block of controllers at once: the
numeric fields' count, min, max and total, then the "" row with the readings counted and
the energy of the trapezoids whose later reading is in the quarter hour (the one before it
may be up to GAP_S earlier).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import DateTime, and_, delete, func, insert, literal, select, tuple_, update

from devicecontrol.database.engine import Reader, Writer
from devicecontrol.database.tables import (
    controllers,
    reading_rollup_progress,
    reading_rollups,
    readings,
)
from devicecontrol.devices.readings.json_sql import (
    GAP_S,
    JsonSql,
    credited_energy,
    numeric_values,
    power_steps,
)

PROGRESS_ID = 1


def _in(start: datetime, end: datetime, first: int, last: int, *, back: int = 0) -> Any:
    # ``controller_id + 0``: no index on the controller can serve this range, so the
    # planner takes the one on time (a block of controllers by their index would walk
    # their whole history; SQLite has no statistics to know better)
    controller = readings.c.controller_id + 0
    return and_(
        readings.c.created_at >= start - timedelta(seconds=back),
        readings.c.created_at < end,
        controller >= first,
        controller <= last,
        readings.c.assignment_id.is_not(None),  # nobody's readings are nobody's to see
    )


async def roll_up(
    connection: Writer, start: datetime, end: datetime, controllers: tuple[int, int], dialect: str
) -> None:
    """Roll ``[start, end)`` up for the controllers whose ids are within ``controllers``."""
    json = JsonSql(dialect)
    first, last = controllers
    when = literal(start, DateTime)
    numeric = numeric_values(json, _in(start, end, first, last))
    fields = select(
        numeric.c.controller_id,
        numeric.c.assignment_id,
        when,
        numeric.c.key,
        func.count(numeric.c.value),
        func.min(numeric.c.value),
        func.max(numeric.c.value),
        func.sum(numeric.c.value),
    ).group_by(numeric.c.controller_id, numeric.c.assignment_id, numeric.c.key)
    columns = ["controller_id", "assignment_id", "period_start", "field", "readings"]
    await connection.execute(
        insert(reading_rollups).from_select([*columns, "minimum", "maximum", "total"], fields)
    )
    counted = (
        select(
            readings.c.controller_id,
            readings.c.assignment_id,
            func.count().label("readings"),
        )
        .where(_in(start, end, first, last))
        .group_by(readings.c.controller_id, readings.c.assignment_id)
        .subquery("counted")
    )
    steps = power_steps(
        json, _in(start, end, first, last, back=GAP_S), readings.c.created_at >= start
    )
    energy = (
        select(steps.c.controller_id, steps.c.assignment_id, credited_energy(steps).label("wh"))
        .group_by(steps.c.controller_id, steps.c.assignment_id)
        .subquery("energy")
    )
    whole = select(
        counted.c.controller_id,
        counted.c.assignment_id,
        when,
        literal(""),
        counted.c.readings,
        energy.c.wh,
    ).select_from(
        counted.outerjoin(
            energy,
            and_(
                energy.c.controller_id == counted.c.controller_id,
                energy.c.assignment_id == counted.c.assignment_id,
            ),
        )
    )
    await connection.execute(insert(reading_rollups).from_select([*columns, "energy_wh"], whole))


async def progress(connection: Reader) -> tuple[datetime, int] | None:
    """(the quarter hour being rolled up, the first controller id not yet done in it)."""
    row = (
        await connection.execute(
            select(
                reading_rollup_progress.c.rolled_until, reading_rollup_progress.c.next_controller
            )
        )
    ).first()
    return None if row is None else (row.rolled_until, int(row.next_controller))


async def save_progress(
    connection: Writer, rolled_until: datetime, next_controller: int, *, first: bool = False
) -> None:
    values = {"rolled_until": rolled_until, "next_controller": next_controller}
    if first:
        await connection.execute(insert(reading_rollup_progress).values(id=PROGRESS_ID, **values))
    else:
        await connection.execute(update(reading_rollup_progress).values(**values))


async def first_reading_at(connection: Reader) -> datetime | None:
    first: datetime | None = (
        await connection.execute(select(func.min(readings.c.created_at)))
    ).scalar_one()
    return first


async def next_reading_at(connection: Reader, since: datetime) -> datetime | None:
    """When the first reading at or after ``since`` arrived, if any did."""
    query = select(func.min(readings.c.created_at)).where(readings.c.created_at >= since)
    following: datetime | None = (await connection.execute(query)).scalar_one()
    return following


async def readings_between(connection: Reader, start: datetime, end: datetime) -> int:
    """How many readings arrived in ``[start, end)``, of every controller."""
    query = (
        select(func.count())
        .select_from(readings)
        .where(readings.c.created_at >= start, readings.c.created_at < end)
    )
    held: int = (await connection.execute(query)).scalar_one()
    return held


async def last_controller_id(connection: Reader) -> int:
    newest = (await connection.execute(select(func.max(controllers.c.id)))).scalar_one()
    return int(newest or 0)


async def delete_rollups_before(connection: Writer, cutoff: datetime, limit: int) -> int:
    """Delete up to ``limit`` rollups of quarter hours that began before ``cutoff``."""
    key = (
        reading_rollups.c.controller_id,
        reading_rollups.c.assignment_id,
        reading_rollups.c.period_start,
        reading_rollups.c.field,
    )
    batch = select(*key).where(reading_rollups.c.period_start < cutoff).limit(limit)
    result = await connection.execute(delete(reading_rollups).where(tuple_(*key).in_(batch)))
    return result.rowcount
