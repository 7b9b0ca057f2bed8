"""UTC time as the database stores it (naive) and as the API shows it.

Every rule that depends on time (token expiry, throttling windows, the token cache) asks
this module, never the system directly, so that tests can move time instead of sleeping:
``use_time_source`` swaps what ``utcnow``, ``timestamp`` and ``monotonic`` read. Modules
that imported ``utcnow`` by name keep working, since the swap is behind it.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Protocol

TIMESTAMP_FORMAT = "%Y-%m-%d %H:%M:%S"
# the same, as a pattern: ASCII digits only (Python's \d takes other scripts' digits too)
TIMESTAMP_PATTERN = "^[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}$"


class TimeSource(Protocol):
    def now(self) -> datetime:
        """Aware UTC, full precision."""
        ...

    def monotonic(self) -> float:
        """Seconds from an arbitrary start, never going back: for durations and TTLs."""
        ...


class SystemTime:
    """The real clocks: what the application always uses."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.monotonic()


SYSTEM_TIME = SystemTime()
_source: TimeSource = SYSTEM_TIME


def use_time_source(source: TimeSource) -> TimeSource:
    """Make ``source`` the time every rule reads; returns the one it replaces (for tests)."""
    global _source
    previous, _source = _source, source
    return previous


def utcnow() -> datetime:
    """Naive UTC, second precision: what the timestamp columns hold (but readings')."""
    return _source.now().replace(tzinfo=None, microsecond=0)


def arrival_time() -> datetime:
    """Naive UTC to the microsecond: when a device's message reached the link. Several link
    processes store one device's readings side by side, and the latest is the one that
    arrived last: within a second, only the microseconds tell."""
    return _source.now().replace(tzinfo=None)


def timestamp() -> float:
    """POSIX seconds, full precision: ``time.time()`` from the active source."""
    return _source.now().timestamp()


def monotonic() -> float:
    """``time.monotonic()`` from the active source."""
    return _source.monotonic()


def format_timestamp(moment: datetime | None) -> str | None:
    """``TIMESTAMP_FORMAT`` of a naive UTC time (as the tables keep them); ``isoformat``
    writes the same text several times faster than ``strftime``, on every row of a list."""
    return None if moment is None else moment.isoformat(" ", "seconds")
