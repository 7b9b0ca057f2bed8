"""The readings summary: buckets of a controller's readings, each numeric field's min, max
and avg per bucket, and a plug's energy, all computed in the database (``aggregates.py``):
from the quarter hours' rollups where they still hold, from the readings elsewhere.

Buckets shorter than a day are whole multiples of their width in UTC; ``1d`` buckets are
the owner's local days, whose UTC offset the database is given for each stretch between
the time zone's transitions. Empty buckets are left out.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from devicecontrol.clock import format_timestamp
from devicecontrol.database.engine import Database
from devicecontrol.devices.readings import aggregates
from devicecontrol.devices.readings.aggregates import Range
from devicecontrol.devices.readings.json_sql import Buckets
from devicecontrol.errors import InvalidField

EVERY: dict[str, int] = {"1m": 60, "5m": 300, "15m": 900, "1h": 3600, "1d": 86400}
DAY = "1d"
MAX_BUCKETS = 1000
DEFAULT_RANGE = timedelta(hours=24)
# what a summary may cover: a day inside the calendar's ends, so that a local day, a bucket's
# end or a time zone's offset near either end is still a date (API.md)
EARLIEST = datetime(1, 1, 2)
LATEST = datetime(9999, 12, 30)
ROUND_TO = 3  # decimals of an average and of energy: finer than any sensor reports
ENERGY = "energy_wh"
PLUG = "smart_plug"
_EPOCH = datetime(1970, 1, 1)


@dataclass(frozen=True, slots=True)
class Plan:
    """What a summary covers and how it cuts it: checked before any query runs."""

    every: str
    zone: ZoneInfo
    since: datetime
    until: datetime
    buckets: Buckets


def plan(
    every: str | None,
    zone: ZoneInfo,
    since: datetime | None,
    until: datetime | None,
    now: datetime,
) -> Plan:
    """The summary's range and buckets, or InvalidField: ``since`` defaults to 24 h before
    ``until`` (itself now), ``every`` to the finest width that keeps within the bucket
    limit."""
    for moment, field in ((since, "since"), (until, "until")):
        if moment is not None and not EARLIEST <= moment <= LATEST:
            earliest, latest = format_timestamp(EARLIEST), format_timestamp(LATEST)
            raise InvalidField(field, f"must be between {earliest} and {latest}")
    end = until if until is not None else now
    start = since if since is not None else end - DEFAULT_RANGE
    if start >= end:
        raise InvalidField("since", "must be before until")
    if every is None:
        every = next(
            (name for name in EVERY if bucket_count(name, zone, start, end) <= MAX_BUCKETS), DAY
        )
    if every not in EVERY:
        raise InvalidField("every", "must be one of " + ", ".join(EVERY))
    count = bucket_count(every, zone, start, end)
    if count > MAX_BUCKETS:
        raise InvalidField(
            "every",
            f"gives {count} buckets over this range; at most {MAX_BUCKETS} (a wider "
            "bucket, or a shorter range)",
        )
    offsets = utc_offsets(zone, start, end) if every == DAY else [(start, 0)]
    return Plan(every, zone, start, end, Buckets(EVERY[every], offsets))


def bucket_count(every: str, zone: ZoneInfo, since: datetime, until: datetime) -> int:
    """How many buckets ``[since, until)`` touches."""
    last = until - timedelta(microseconds=1)
    if every == DAY:
        return (_local(last, zone).date() - _local(since, zone).date()).days + 1
    width = EVERY[every]
    return int(_seconds(last) // width - _seconds(since) // width) + 1


def utc_offsets(zone: ZoneInfo, since: datetime, until: datetime) -> list[tuple[datetime, int]]:
    """(from which UTC instant, the UTC offset in seconds) over ``[since, until)``: the
    first at ``since``, then one at each of the zone's transitions, found to the second."""
    offsets = [(since, _offset(since, zone))]
    day = since
    while day < until:
        following = min(day + timedelta(days=1), until)
        if _offset(following, zone) != offsets[-1][1]:
            changed = _transition(day, following, zone)
            offsets.append((changed, _offset(changed, zone)))
        day = following
    return offsets


def _transition(before: datetime, after: datetime, zone: ZoneInfo) -> datetime:
    """The first second in ``(before, after]`` whose offset is ``after``'s."""
    target = _offset(after, zone)
    low, high = before, after
    while high - low > timedelta(seconds=1):
        middle = low + (high - low) / 2
        middle = middle.replace(microsecond=0)
        if _offset(middle, zone) == target:
            high = middle
        else:
            low = middle
    return high


def _local(moment: datetime, zone: ZoneInfo) -> datetime:
    return moment.replace(tzinfo=UTC).astimezone(zone)


def _offset(moment: datetime, zone: ZoneInfo) -> int:
    offset = _local(moment, zone).utcoffset()
    return 0 if offset is None else int(offset.total_seconds())


def _seconds(moment: datetime) -> float:
    return (moment - _EPOCH).total_seconds()


def bucket_start(plan: Plan, number: int) -> datetime:
    """The UTC instant a bucket begins: its local midnight for ``1d``."""
    if plan.every != DAY:
        return _EPOCH + timedelta(seconds=number * plan.buckets.width)
    midnight = datetime.combine(date(1970, 1, 1) + timedelta(days=number), time(), plan.zone)
    return midnight.astimezone(UTC).replace(tzinfo=None)


def bucket_number(plan: Plan, moment: datetime) -> int:
    """The bucket a UTC moment falls in, as the database numbers them."""
    if plan.every != DAY:
        return int(_seconds(moment) // plan.buckets.width)
    return (_local(moment, plan.zone).date() - date(1970, 1, 1)).days


@dataclass(frozen=True, slots=True)
class Sources:
    """Where a summary's numbers come from: the buckets whose readings the rollups count
    exactly (their quarter hours, and those as time ranges), and the time ranges read raw
    (the edges, the newest hours, a bucket with a reading stored late or purged)."""

    rolled_energy: dict[int, float]
    rolled_counts: dict[int, int]
    rolled_spans: list[tuple[datetime, datetime]]
    raw_spans: list[tuple[datetime, datetime]]


async def sources(database: Database, plan: Plan, within: Range) -> Sources:
    """Which buckets the rollups can answer for: those made of whole quarter hours inside
    the range whose rollups count what the table holds now. One count of the readings of
    all such buckets decides when it matches; a count per bucket, when it does not."""
    whole = [(within.since, within.until)]
    if plan.buckets.width % aggregates.PERIOD_S:
        return Sources({}, {}, [], whole)
    first, last = _quarter_hour_after(within.since), aggregates.quarter_hour_of(within.until)
    if first >= last:
        return Sources({}, {}, [], whole)
    numbers = range(
        bucket_number(plan, first),
        bucket_number(plan, last - timedelta(seconds=aggregates.PERIOD_S)) + 1,
    )
    candidates = [
        number
        for number in numbers
        if max(bucket_start(plan, number), within.since) >= first
        and min(bucket_start(plan, number + 1), within.until) <= last
    ]
    if not candidates:
        return Sources({}, {}, [], whole)
    begins = max(bucket_start(plan, candidates[0]), within.since)
    ends = min(bucket_start(plan, candidates[-1] + 1), within.until)
    dialect = database.dialect_name
    candidate_range = Range(within.controller_id, within.assignment_id, begins, ends)
    async with database.read() as counting, database.read() as rolling:
        held_readings, rolled = await asyncio.gather(
            aggregates.count_between(counting, within, begins, ends),
            aggregates.rolled_buckets(rolling, candidate_range, plan.buckets, dialect),
        )
        rolled_counts = {int(row.bucket): int(row.readings) for row in rolled}
        held = set(candidates)
        if sum(rolled_counts.values()) != held_readings:  # some bucket's rollups are off
            counted = await aggregates.bucket_counts(
                counting, within, [(begins, ends)], plan.buckets, dialect
            )
            actual = {int(row.bucket): int(row.readings) for row in counted}
            held = {n for n in candidates if rolled_counts.get(n, 0) == actual.get(n, 0)}
    raw = _spans(plan, within, set(candidates) - held)
    if within.since < begins:
        raw.insert(0, (within.since, begins))
    if ends < within.until:
        raw.append((ends, within.until))
    return Sources(
        {int(row.bucket): float(row.energy_wh or 0.0) for row in rolled if int(row.bucket) in held},
        {number: count for number, count in rolled_counts.items() if number in held},
        _spans(plan, within, held),
        _joined(raw),
    )


def _quarter_hour_after(moment: datetime) -> datetime:
    """The first quarter hour's start at or after ``moment``."""
    start = aggregates.quarter_hour_of(moment)
    return start if start == moment else start + timedelta(seconds=aggregates.PERIOD_S)


def _joined(spans: list[tuple[datetime, datetime]]) -> list[tuple[datetime, datetime]]:
    joined: list[tuple[datetime, datetime]] = []
    for start, end in sorted(spans):
        if joined and joined[-1][1] >= start:
            joined[-1] = (joined[-1][0], max(end, joined[-1][1]))
        else:
            joined.append((start, end))
    return joined


def _spans(plan: Plan, within: Range, numbers: set[int]) -> list[tuple[datetime, datetime]]:
    """The buckets' stretches of time within the range, neighbours joined."""
    spans: list[tuple[datetime, datetime]] = []
    for number in sorted(numbers):
        start = max(bucket_start(plan, number), within.since)
        end = min(bucket_start(plan, number + 1), within.until)
        if spans and spans[-1][1] == start:
            spans[-1] = (spans[-1][0], end)
        else:
            spans.append((start, end))
    return spans


async def summarize(
    database: Database, plan: Plan, within: Range, *, device_type: str
) -> list[dict[str, Any]]:
    """The non-empty buckets, oldest first: ``start``, ``count``, each numeric field's
    ``min``/``max``/``avg``, and a plug's ``energy_wh``.

    The buckets the rollups count exactly are read from them, the rest raw. The queries of
    each round run side by side, each on a connection of its own (SQLite's off the event
    loop and without the GIL).
    """
    dialect = database.dialect_name
    found = await sources(database, plan, within)
    buckets, spans = plan.buckets, found.raw_spans
    plug = device_type == PLUG
    async with (
        database.read() as counting,
        database.read() as raw,
        database.read() as rolled,
        database.read() as powered,
    ):
        raw_counts, raw_fields, rolled_fields, raw_energy = await asyncio.gather(
            aggregates.bucket_counts(counting, within, spans, buckets, dialect)
            if spans
            else _nothing(),
            aggregates.raw_field_statistics(raw, within, spans, buckets, dialect)
            if spans
            else _nothing(),
            aggregates.rolled_field_statistics(rolled, within, found.rolled_spans, buckets, dialect)
            if found.rolled_spans
            else _nothing(),
            aggregates.raw_energy(powered, within, spans, buckets, dialect)
            if plug and spans
            else _nothing(),
        )
    energy: dict[int, float] = {}
    for row in raw_energy:
        energy[int(row.bucket)] = energy.get(int(row.bucket), 0.0) + float(row.energy_wh or 0.0)
    for number, rolled_wh in found.rolled_energy.items():
        energy[number] = energy.get(number, 0.0) + rolled_wh
    counts = dict(found.rolled_counts)
    for row in raw_counts:
        counts[int(row.bucket)] = counts.get(int(row.bucket), 0) + int(row.readings)
    shown: dict[int, dict[str, Any]] = {}
    for number in sorted(counts):
        if not counts[number]:
            continue
        start = format_timestamp(bucket_start(plan, number))
        shown[number] = {"start": start, "count": counts[number]}
        if plug:
            shown[number][ENERGY] = round(energy.get(number, 0.0), ROUND_TO)
    for (number, key), statistics in _merged([*raw_fields, *rolled_fields]):
        bucket = shown.get(number)
        if bucket is not None and key not in ("start", "count", ENERGY):
            bucket[key] = statistics
    return list(shown.values())


async def _nothing() -> list[Any]:
    return []


def _merged(rows: Iterable[Any]) -> Iterator[tuple[tuple[int, str], dict[str, float]]]:
    """Each (bucket, field)'s min, max and avg from its raw and rolled parts, by name."""
    parts: dict[tuple[int, str], tuple[int, float, float, float]] = {}
    for row in rows:
        if not row.values or row.minimum is None:
            continue
        key = (int(row.bucket), str(row.key))
        values, low, high, total = int(row.values), row.minimum, row.maximum, row.total
        if key in parts:
            before = parts[key]
            values, low, high = values + before[0], min(low, before[1]), max(high, before[2])
            total += before[3]
        parts[key] = (values, float(low), float(high), float(total))
    for key in sorted(parts, key=lambda key: (key[0], key[1])):
        values, low, high, total = parts[key]
        average = total / values
        if math.isfinite(average):
            yield key, {"min": low, "max": high, "avg": round(average, ROUND_TO)}
