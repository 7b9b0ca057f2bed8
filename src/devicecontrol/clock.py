"""UTC time as the database stores it (naive) and as the API shows it."""

from __future__ import annotations

from datetime import UTC, datetime

TIMESTAMP_FORMAT = "%Y-%m-%d %H:%M:%S"


def utcnow() -> datetime:
    """Naive UTC, second precision: what every timestamp column holds."""
    return datetime.now(UTC).replace(tzinfo=None, microsecond=0)


def format_timestamp(moment: datetime | None) -> str | None:
    return None if moment is None else moment.strftime(TIMESTAMP_FORMAT)
