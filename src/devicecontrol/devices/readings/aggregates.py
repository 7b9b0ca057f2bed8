"""Queries that summarize one controller's readings in the database: per bucket, the count
and each numeric field's min, max and avg, and a plug's energy. No rules here: the buckets
(their width, and the UTC offsets of local days) come from ``summary.py``.

A bucket is a number: ``(epoch seconds + the UTC offset in force) // width``. The offset is
a ``CASE`` over the time zone's transitions within the range (none for UTC, two a year for
a zone with summer time), so local days need no table of days. JSON is taken apart by the
database (SQLite's ``json_each``, PostgreSQL's ``jsonb_each``); a list such as a plug's
``power`` counts as the sum of its numbers. The plans and their cost are in docs/DESIGN.md,
"Readings summary".
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Float,
    Integer,
    Row,
    and_,
    case,
    cast,
    func,
    literal,
    select,
    true,
    union_all,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.sql.expression import FromClause, TableValuedAlias

from devicecontrol.database.engine import LongReader
from devicecontrol.database.tables import readings

GAP_S = 600  # consecutive readings further apart than this are not integrated across
ENERGY_FIELD = "power"  # what a plug reports: watts, one number per outlet
# SQLite's unixepoch() (3.38) is three times faster than strftime('%s')
_UNIXEPOCH = sqlite3.sqlite_version_info >= (3, 38)


@dataclass(frozen=True, slots=True)
class Buckets:
    """How readings fall into buckets: ``width`` seconds, after adding the UTC offset in
    force; ``offsets`` are (UTC instant from which, offset in seconds), the first one in
    force from the range's start."""

    width: int
    offsets: Sequence[tuple[datetime, int]]


@dataclass(frozen=True, slots=True)
class Range:
    """One ownership's readings of one controller, ``since`` inclusive, ``until`` not."""

    controller_id: int
    assignment_id: int
    since: datetime
    until: datetime


class _Json:
    """How a dialect takes a reading's JSON apart."""

    def __init__(self, dialect: str) -> None:
        self.postgresql = dialect == "postgresql"

    def epoch(self) -> ColumnElement[Any]:
        if self.postgresql:
            return func.date_part("epoch", readings.c.created_at)
        if _UNIXEPOCH:
            return func.unixepoch(readings.c.created_at)
        return cast(func.strftime("%s", readings.c.created_at), Integer)

    def bucket(self, buckets: Buckets) -> ColumnElement[Any]:
        """The bucket number of each reading."""
        first = buckets.offsets[0][1]
        offset: ColumnElement[Any] = literal(first)
        if len(buckets.offsets) > 1:
            offset = case(
                *[
                    (readings.c.created_at >= starts, literal(seconds))
                    for starts, seconds in reversed(buckets.offsets[1:])
                ],
                else_=literal(first),
            )
        local = self.epoch() + offset
        if self.postgresql:
            return cast(func.floor(local / buckets.width), Integer)
        return local // buckets.width  # integers: SQLite divides them as integers

    def members(self) -> TableValuedAlias:
        """The payload's members: ``key``, ``value`` (and SQLite's ``type``)."""
        if self.postgresql:
            payload = cast(readings.c.payload, postgresql.JSONB)
            return func.jsonb_each(payload).table_valued("key", "value", name="member")
        return func.json_each(readings.c.payload).table_valued(
            "key", "value", "type", name="member"
        )

    def elements(self, members: TableValuedAlias) -> TableValuedAlias:
        """The elements of a member that is a list."""
        if self.postgresql:
            return func.jsonb_array_elements(members.c.value).table_valued("value", name="element")
        return func.json_each(members.c.value).table_valued("value", "type", name="element")

    def is_number(self, value: FromClause) -> ColumnElement[bool]:
        if self.postgresql:
            return func.jsonb_typeof(value.c.value) == "number"
        return value.c.type.in_(("integer", "real"))

    def is_list(self, value: FromClause) -> ColumnElement[bool]:
        if self.postgresql:
            return func.jsonb_typeof(value.c.value) == "array"
        return value.c.type == "array"

    def number(self, value: FromClause) -> ColumnElement[Any]:
        return cast(value.c.value, Float) if self.postgresql else value.c.value


def _in_range(within: Range) -> ColumnElement[bool]:
    return and_(
        readings.c.controller_id == within.controller_id,
        readings.c.assignment_id == within.assignment_id,
        readings.c.created_at >= within.since,
        readings.c.created_at < within.until,
    )


def _numeric_values(json: _Json, within: Range, buckets: Buckets, field: str | None) -> Any:
    """(bucket, key, value, created_at, id) of every numeric member of every reading (only
    ``field`` when given): the numbers as they are, the lists summed per reading."""
    bucket = json.bucket(buckets).label("bucket")
    members = json.members()
    only = [members.c.key == field] if field is not None else []
    numbers = (
        select(
            bucket,
            members.c.key.label("key"),
            json.number(members).label("value"),
            readings.c.created_at,
            readings.c.id,
        )
        .select_from(readings.join(members, true()))
        .where(_in_range(within), json.is_number(members), *only)
    )
    elements = json.elements(members)
    summed_lists = (
        select(
            bucket,
            members.c.key.label("key"),
            func.sum(json.number(elements)).label("value"),
            readings.c.created_at,
            readings.c.id,
        )
        .select_from(readings.join(members, true()).join(elements, true()))
        .where(_in_range(within), json.is_list(members), json.is_number(elements), *only)
        .group_by(readings.c.id, members.c.key)
    )
    return union_all(numbers, summed_lists).subquery("numeric")


async def field_statistics(
    connection: LongReader, within: Range, buckets: Buckets, dialect: str
) -> list[Row[Any]]:
    """(bucket, key, min, max, avg) of every numeric field, per bucket."""
    numeric = _numeric_values(_Json(dialect), within, buckets, None)
    query = select(
        numeric.c.bucket,
        numeric.c.key,
        func.min(numeric.c.value).label("min"),
        func.max(numeric.c.value).label("max"),
        func.avg(numeric.c.value).label("avg"),
    ).group_by(numeric.c.bucket, numeric.c.key)
    return await connection.execute_long(query)


async def bucket_counts(
    connection: LongReader, within: Range, buckets: Buckets, dialect: str
) -> list[Row[Any]]:
    """(bucket, readings): how many readings in each non-empty bucket."""
    bucket = _Json(dialect).bucket(buckets).label("bucket")
    query = select(bucket, func.count().label("readings")).where(_in_range(within)).group_by(bucket)
    return await connection.execute_long(query)


async def energy(
    connection: LongReader, within: Range, buckets: Buckets, dialect: str
) -> list[Row[Any]]:
    """(bucket, energy_wh): power integrated by trapezoids between consecutive readings at
    most ``GAP_S`` apart, each credited to the bucket of its later reading."""
    json = _Json(dialect)
    power = _numeric_values(json, within, buckets, ENERGY_FIELD)
    order = (power.c.created_at, power.c.id)
    at = func.date_part("epoch", power.c.created_at) if json.postgresql else _sqlite_epoch(power)
    steps = select(
        power.c.bucket,
        (at - func.lag(at).over(order_by=order)).label("seconds"),
        ((power.c.value + func.lag(power.c.value).over(order_by=order)) / 2.0).label("watts"),
    ).subquery("steps")
    query = (
        select(
            steps.c.bucket,
            func.sum(steps.c.watts * steps.c.seconds / 3600.0).label("energy_wh"),
        )
        .where(steps.c.seconds <= GAP_S)
        .group_by(steps.c.bucket)
    )
    return await connection.execute_long(query)


def _sqlite_epoch(power: Any) -> ColumnElement[Any]:
    if _UNIXEPOCH:
        return func.unixepoch(power.c.created_at)
    return cast(func.strftime("%s", power.c.created_at), Integer)


async def field_names(connection: LongReader, within: Range, dialect: str) -> list[str]:
    """Every field any of the readings has, in name order (the CSV export's columns)."""
    members = _Json(dialect).members()
    query = (
        select(members.c.key)
        .select_from(readings.join(members, true()))
        .where(_in_range(within))
        .group_by(members.c.key)
        .order_by(members.c.key)
    )
    return [str(row.key) for row in await connection.execute_long(query)]
