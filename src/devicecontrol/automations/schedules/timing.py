"""When a weekly schedule fires (contract §12), in its IANA time zone, with zoneinfo only.

A wall-clock time is turned into a UTC instant by ``zoneinfo`` and checked by the round
trip back: a time that does not come back unchanged does not exist that day (the clocks
sprang over it), and the schedule fires at the first wall-clock minute after it that does.
A time that happens twice (the clocks fell back) is taken with ``fold=0``, its first
occurrence, and only that one is ever a firing. No offsets are computed here by hand.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from functools import cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

START, END = "start", "end"  # the command at from_time, the end command at to_time
_KIND_ORDER = {START: 0, END: 1}
_HHMM = re.compile(r"([01][0-9]|2[0-3]):([0-5][0-9])")
_DAYS = re.compile(r"[01]{7}")
MAX_ZONE_NAME = 64
# the longest wall-clock gap a zone has had is a day (Samoa, 2011): stepping a minute at a
# time over it always finds the first minute after it
_LONGEST_GAP_MINUTES = 24 * 60 + 1


def parse_time(text: str) -> time | None:
    """``HH:MM`` (24 h, ASCII digits), or None."""
    match = _HHMM.fullmatch(text)
    return time(int(match[1]), int(match[2])) if match else None


def is_days(text: str) -> bool:
    """Seven 0/1 characters, Monday first."""
    return bool(_DAYS.fullmatch(text))


@cache
def _iana_names() -> frozenset[str]:
    """The zone names of the database (the system's, else tzdata's), read once (0.1 s):
    not the leap-second ``right/`` and ``posix/`` copies, nor this machine's ``localtime``."""
    return frozenset(available_timezones() - {"localtime"})


def zone(name: str) -> ZoneInfo | None:
    """The IANA zone of that name, or None."""
    if not name or len(name) > MAX_ZONE_NAME or name not in _iana_names():
        return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):  # listed, yet unreadable
        return None


@dataclass(frozen=True, slots=True)
class Timetable:
    days: str  # Monday first
    from_time: time
    to_time: time | None
    zone: ZoneInfo
    with_end: bool  # an end command fires at to_time

    def end_day(self, start_day: date) -> date:
        """to_time at or before from_time ends the next day (22:00-06:00 runs overnight)."""
        assert self.to_time is not None
        return start_day if self.to_time > self.from_time else start_day + timedelta(days=1)


def instant_of(day: date, at: time, where: ZoneInfo) -> datetime:
    """The UTC instant of the wall-clock time ``at`` on ``day`` in ``where``: its first
    occurrence when it happens twice; the first existing minute after it when it does not
    exist."""
    wall = datetime.combine(day, at)
    for _ in range(_LONGEST_GAP_MINUTES):
        instant = wall.replace(tzinfo=where, fold=0).astimezone(UTC)
        if instant.astimezone(where).replace(tzinfo=None) == wall:
            return instant
        wall += timedelta(minutes=1)  # the next wall-clock minute, not an offset
    raise ValueError(f"no wall-clock time after {day} {at} exists in {where.key}")


def next_firing(
    table: Timetable, after: datetime, after_kind: str = END
) -> tuple[datetime, str] | None:
    """The first firing (UTC instant, kind) after ``after`` (aware), or None when no day is
    on. At the same instant a start comes before an end: ``after_kind`` says which firings
    at ``after`` itself are already done (END: both)."""
    first_day = after.astimezone(table.zone).date() - timedelta(days=1)  # overnight ends
    done = (after, _KIND_ORDER[after_kind])
    best: tuple[datetime, str] | None = None
    for offset in range(9):
        day = first_day + timedelta(days=offset)
        if table.days[day.weekday()] != "1":
            continue
        firings = [(instant_of(day, table.from_time, table.zone), START)]
        if table.with_end and table.to_time is not None:
            firings.append((instant_of(table.end_day(day), table.to_time, table.zone), END))
        for instant, kind in firings:
            key = (instant, _KIND_ORDER[kind])
            if key > done and (best is None or key < (best[0], _KIND_ORDER[best[1]])):
                best = (instant, kind)
    return best


def as_naive_utc(instant: datetime) -> datetime:
    """As the tables keep times."""
    return instant.astimezone(UTC).replace(tzinfo=None)


def as_aware_utc(stored: datetime) -> datetime:
    return stored.replace(tzinfo=UTC)
