"""The readings summary: buckets of a controller's readings, each numeric field's min, max
and avg per bucket, and a plug's energy, all computed in the database (``aggregates.py``).

Buckets shorter than a day are whole multiples of their width in UTC; ``1d`` buckets are
the owner's local days, whose UTC offset the database is given for each stretch between
the time zone's transitions. Empty buckets are left out.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from devicecontrol.clock import format_timestamp
from devicecontrol.database.engine import LongReader
from devicecontrol.devices.readings import aggregates
from devicecontrol.devices.readings.aggregates import Buckets, Range
from devicecontrol.errors import InvalidField

EVERY: dict[str, int] = {"1m": 60, "5m": 300, "15m": 900, "1h": 3600, "1d": 86400}
DAY = "1d"
MAX_BUCKETS = 1000
DEFAULT_RANGE = timedelta(hours=24)
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


async def summarize(
    connection: LongReader, plan: Plan, within: Range, *, dialect: str, device_type: str
) -> list[dict[str, Any]]:
    """The non-empty buckets, oldest first: ``start``, ``count``, each numeric field's
    ``min``/``max``/``avg``, and a plug's ``energy_wh``."""
    counts = await aggregates.bucket_counts(connection, within, plan.buckets, dialect)
    fields = await aggregates.field_statistics(connection, within, plan.buckets, dialect)
    energy: dict[int, float] = {}
    if device_type == PLUG:
        rows = await aggregates.energy(connection, within, plan.buckets, dialect)
        energy = {int(row.bucket): float(row.energy_wh or 0.0) for row in rows}
    shown: dict[int, dict[str, Any]] = {}
    for row in sorted(counts, key=lambda row: int(row.bucket)):
        number = int(row.bucket)
        start = format_timestamp(bucket_start(plan, number))
        shown[number] = {"start": start, "count": int(row.readings)}
        if device_type == PLUG:
            shown[number][ENERGY] = round(energy.get(number, 0.0), ROUND_TO)
    for number, key, statistics in _statistics(sorted(fields, key=lambda row: str(row.key))):
        bucket = shown.get(number)
        if bucket is not None and key not in ("start", "count", ENERGY):
            bucket[key] = statistics
    return list(shown.values())


def _statistics(rows: Iterable[Any]) -> Iterator[tuple[int, str, dict[str, float]]]:
    for row in rows:
        if row.min is None or not math.isfinite(float(row.avg)):
            continue
        yield (
            int(row.bucket),
            str(row.key),
            {
                "min": float(row.min),
                "max": float(row.max),
                "avg": round(float(row.avg), ROUND_TO),
            },
        )
