"""Queries that summarize one controller's readings in the database, per bucket: the count,
each numeric field's count, min, max and total, and a plug's energy. No rules here: which
stretches are read raw and which quarter hours come from the rollups is ``summary.py``'s
choice.

The raw queries read the readings within ``spans`` (JSON taken apart by the database,
``json_sql.py``); the rolled ones read ``reading_rollups`` for the quarter hours given.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, Row, and_, func, or_, select, true

from devicecontrol.database.engine import LongReader
from devicecontrol.database.tables import reading_rollups, readings
from devicecontrol.devices.readings.json_sql import (
    GAP_S,
    Buckets,
    JsonSql,
    credited_energy,
    numeric_values,
    power_steps,
)

PERIOD_S = 900  # a rollup's quarter hour
Spans = Sequence[tuple[datetime, datetime]]


def quarter_hour_of(moment: datetime) -> datetime:
    """The start of the quarter hour (UTC) that ``moment`` is in."""
    return moment.replace(minute=moment.minute - moment.minute % 15, second=0, microsecond=0)


@dataclass(frozen=True, slots=True)
class Range:
    """One ownership's readings of one controller, ``since`` inclusive, ``until`` not."""

    controller_id: int
    assignment_id: int
    since: datetime
    until: datetime


def _owned(within: Range) -> ColumnElement[bool]:
    return and_(
        readings.c.controller_id == within.controller_id,
        readings.c.assignment_id == within.assignment_id,
    )


def _in_spans(spans: Spans, *, back: timedelta = timedelta()) -> ColumnElement[bool]:
    return or_(
        *[
            and_(readings.c.created_at >= since - back, readings.c.created_at < until)
            for since, until in spans
        ]
    )


async def bucket_counts(
    connection: LongReader, within: Range, spans: Spans, buckets: Buckets, dialect: str
) -> list[Row[Any]]:
    """(bucket, readings): how many readings within ``spans`` each non-empty bucket has
    (no JSON read)."""
    bucket = JsonSql(dialect).bucket(buckets).label("bucket")
    query = (
        select(bucket, func.count().label("readings"))
        .where(_owned(within), _in_spans(spans))
        .group_by(bucket)
    )
    return await connection.execute_long(query)


async def count_between(
    connection: LongReader, within: Range, since: datetime, until: datetime
) -> int:
    """How many readings arrived in ``[since, until)`` (an index range, counted)."""
    query = select(func.count()).where(_owned(within), _in_spans([(since, until)]))
    rows = await connection.execute_long(query)
    return int(rows[0][0])


async def rolled_buckets(
    connection: LongReader, within: Range, buckets: Buckets, dialect: str
) -> list[Row[Any]]:
    """(bucket, readings, energy_wh) of the quarter hours rolled up whole within the range."""
    begins = reading_rollups.c.period_start
    bucket = JsonSql(dialect).bucket(buckets, begins).label("bucket")
    query = (
        select(
            bucket,
            func.sum(reading_rollups.c.readings).label("readings"),
            func.sum(reading_rollups.c.energy_wh).label("energy_wh"),
        )
        .where(
            reading_rollups.c.controller_id == within.controller_id,
            reading_rollups.c.assignment_id == within.assignment_id,
            begins >= within.since,
            begins <= within.until - timedelta(seconds=PERIOD_S),
            reading_rollups.c.field == "",
        )
        .group_by(bucket)
    )
    return await connection.execute_long(query)


async def raw_field_statistics(
    connection: LongReader, within: Range, spans: Spans, buckets: Buckets, dialect: str
) -> list[Row[Any]]:
    """(bucket, key, values, minimum, maximum, total) of every numeric field of the
    readings within ``spans``."""
    json = JsonSql(dialect)
    numeric = numeric_values(json, and_(_owned(within), _in_spans(spans)))
    bucket = json.bucket(buckets, numeric.c.created_at).label("bucket")
    query = select(
        bucket,
        numeric.c.key,
        func.count(numeric.c.value).label("values"),
        func.min(numeric.c.value).label("minimum"),
        func.max(numeric.c.value).label("maximum"),
        func.sum(numeric.c.value).label("total"),
    ).group_by(bucket, numeric.c.key)
    return await connection.execute_long(query)


async def rolled_field_statistics(
    connection: LongReader, within: Range, spans: Spans, buckets: Buckets, dialect: str
) -> list[Row[Any]]:
    """(bucket, key, values, minimum, maximum, total) from the rollups of the quarter hours
    that begin within ``spans`` and end within the range."""
    bucket = JsonSql(dialect).bucket(buckets, reading_rollups.c.period_start).label("bucket")
    begins = reading_rollups.c.period_start
    query = (
        select(
            bucket,
            reading_rollups.c.field.label("key"),
            func.sum(reading_rollups.c.readings).label("values"),
            func.min(reading_rollups.c.minimum).label("minimum"),
            func.max(reading_rollups.c.maximum).label("maximum"),
            func.sum(reading_rollups.c.total).label("total"),
        )
        .where(
            reading_rollups.c.controller_id == within.controller_id,
            reading_rollups.c.assignment_id == within.assignment_id,
            or_(*[and_(begins >= since, begins < until) for since, until in spans]),
            begins <= within.until - timedelta(seconds=PERIOD_S),
            reading_rollups.c.field != "",
        )
        .group_by(bucket, reading_rollups.c.field)
    )
    return await connection.execute_long(query)


async def raw_energy(
    connection: LongReader, within: Range, spans: Spans, buckets: Buckets, dialect: str
) -> list[Row[Any]]:
    """(bucket, energy_wh) of the readings within ``spans``: trapezoids between consecutive
    readings at most GAP_S apart, each credited to the bucket of its later reading."""
    json = JsonSql(dialect)
    steps = power_steps(
        json,
        and_(_owned(within), _in_spans(spans, back=timedelta(seconds=GAP_S))),
        _in_spans(spans),
    )
    bucket = json.bucket(buckets, steps.c.created_at).label("bucket")
    query = select(bucket, credited_energy(steps).label("energy_wh")).group_by(bucket)
    return await connection.execute_long(query)


async def field_names(connection: LongReader, within: Range, dialect: str) -> list[str]:
    """Every field any of the readings has, in name order (the CSV export's columns)."""
    members = JsonSql(dialect).members()
    query = (
        select(members.c.key)
        .select_from(readings.join(members, true()))
        .where(_owned(within), _in_spans([(within.since, within.until)]))
        .group_by(members.c.key)
        .order_by(members.c.key)
    )
    return [str(row.key) for row in await connection.execute_long(query)]
