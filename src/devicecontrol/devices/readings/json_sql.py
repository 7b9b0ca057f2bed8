"""How each database takes a reading's JSON apart and tells the time, for the queries that
summarize readings (``aggregates.py``, ``rollups.py``): SQLite's ``json_each`` and
``unixepoch``, PostgreSQL's ``jsonb_each`` and ``date_part``.

A bucket is a number: ``(epoch seconds + the UTC offset in force) // width``. The offset is
a ``CASE`` over the time zone's transitions within the range (none for UTC, two a year for
a zone with summer time), so local days need no table of days. A list such as a plug's
``power`` counts as the sum of its numbers.
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

from devicecontrol.database.tables import readings

ENERGY_FIELD = "power"  # what a plug reports: watts, one number per outlet
GAP_S = 600  # consecutive readings further apart than this are not integrated across
# SQLite's unixepoch() (3.38) is three times faster than strftime('%s')
_UNIXEPOCH = sqlite3.sqlite_version_info >= (3, 38)


@dataclass(frozen=True, slots=True)
class Buckets:
    """How readings fall into buckets: ``width`` seconds, after adding the UTC offset in
    force; ``offsets`` are (UTC instant from which, offset in seconds), the first one in
    force from the range's start."""

    width: int
    offsets: Sequence[tuple[datetime, int]]


class JsonSql:
    """How a dialect takes a reading's JSON apart."""

    def __init__(self, dialect: str) -> None:
        self.postgresql = dialect == "postgresql"

    def epoch(self, moment: Any = readings.c.created_at) -> ColumnElement[Any]:
        """Seconds since 1970 of a timestamp column (UTC, as the tables keep them)."""
        if self.postgresql:
            return func.date_part("epoch", moment)
        if _UNIXEPOCH:
            return func.unixepoch(moment)
        return cast(func.strftime("%s", moment), Integer)

    def bucket(self, buckets: Buckets, moment: Any = readings.c.created_at) -> ColumnElement[Any]:
        """The bucket number of a timestamp column (a reading's arrival by default)."""
        first = buckets.offsets[0][1]
        offset: ColumnElement[Any] = literal(first)
        if len(buckets.offsets) > 1:
            offset = case(
                *[
                    (moment >= starts, literal(seconds))
                    for starts, seconds in reversed(buckets.offsets[1:])
                ],
                else_=literal(first),
            )
        local = self.epoch(moment) + offset
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

    def power(self) -> ColumnElement[Any]:
        """A reading's ``power``: the number, or the sum of the list's numbers (one parse of
        the payload, where the members' table would parse it twice)."""
        if self.postgresql:
            member = cast(readings.c.payload, postgresql.JSONB)[ENERGY_FIELD]
            elements = func.jsonb_array_elements(member).table_valued("value", name="element")
            summed = (
                select(func.sum(cast(elements.c.value, Float)))
                .where(func.jsonb_typeof(elements.c.value) == "number")
                .scalar_subquery()
            )
            kind = func.jsonb_typeof(member)
            return case((kind == "number", cast(member, Float)), (kind == "array", summed))
        elements = func.json_each(readings.c.payload, "$." + ENERGY_FIELD).table_valued(
            "value", "type", name="element"
        )
        return (
            select(func.sum(elements.c.value))
            .where(elements.c.type.in_(("integer", "real")))
            .scalar_subquery()
        )

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


def numeric_values(json: JsonSql, where: ColumnElement[bool], field: str | None = None) -> Any:
    """(controller_id, assignment_id, created_at, key, value) of every numeric member of
    the readings ``where`` holds (only ``field`` when given): numbers as they are, lists
    summed per reading."""
    members = json.members()
    only = [members.c.key == field] if field is not None else []
    columns = (readings.c.controller_id, readings.c.assignment_id, readings.c.created_at)
    numbers = (
        select(*columns, members.c.key.label("key"), json.number(members).label("value"))
        .select_from(readings.join(members, true()))
        .where(where, json.is_number(members), *only)
    )
    elements = json.elements(members)
    if json.postgresql:
        summed_lists = (
            select(*columns, members.c.key.label("key"), func.sum(json.number(elements)))
            .select_from(readings.join(members, true()).join(elements, true()))
            .where(where, json.is_list(members), json.is_number(elements), *only)
            .group_by(readings.c.id, members.c.key)
        )
    else:
        # a scalar subquery per list, not a GROUP BY on the reading's id: grouping made
        # SQLite walk the table in id order instead of searching the time range
        summed = (
            select(func.sum(elements.c.value)).where(json.is_number(elements)).scalar_subquery()
        )
        summed_lists = (
            select(*columns, members.c.key.label("key"), summed)
            .select_from(readings.join(members, true()))
            .where(where, json.is_list(members), *only)
        )
    return union_all(numbers, summed_lists).subquery("numeric")


def power_steps(json: JsonSql, where: ColumnElement[bool], inside: ColumnElement[bool]) -> Any:
    """(controller_id, assignment_id, created_at, inside, seconds, watts): each reading
    ``where`` holds that reports power, with the trapezoid from the one before it of the
    same ownership (``seconds`` between them, their mean ``watts``). ``where`` reaches
    GAP_S further back than ``inside``, so that the first reading inside has its
    predecessor."""
    power = (
        select(
            readings.c.controller_id,
            readings.c.assignment_id,
            readings.c.created_at,
            readings.c.id,
            cast(json.epoch(), Float).label("at"),
            json.power().label("watts"),
            case((inside, 1), else_=0).label("inside"),
        )
        .where(where)
        .subquery("power")
    )
    ownership = (power.c.controller_id, power.c.assignment_id)
    order = (power.c.created_at, power.c.id)
    return (
        select(
            power.c.controller_id,
            power.c.assignment_id,
            power.c.created_at,
            power.c.inside,
            (power.c.at - func.lag(power.c.at).over(partition_by=ownership, order_by=order)).label(
                "seconds"
            ),
            (
                (
                    power.c.watts
                    + func.lag(power.c.watts).over(partition_by=ownership, order_by=order)
                )
                / 2.0
            ).label("watts"),
        )
        .where(power.c.watts.is_not(None))
        .subquery("steps")
    )


def _before(column: Any, ownership: Any, order: Any) -> ColumnElement[Any]:
    """The value of ``column`` in the reading before, of the same ownership."""
    return func.lag(column).over(partition_by=ownership, order_by=order)


def credited_energy(steps: Any) -> ColumnElement[Any]:
    """The energy (Wh) of the steps inside, none bridging a gap longer than GAP_S."""
    credited = and_(steps.c.inside == 1, steps.c.seconds <= GAP_S)
    return func.sum(case((credited, steps.c.watts * steps.c.seconds / 3600.0)))
