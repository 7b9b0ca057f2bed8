"""A controller's readings as the page's charts draw them: the API's own summary (the
database buckets them) over the last hour, day, week or month, each numeric field's
average per bucket; and a plug's energy per local day, as bars."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from devicecontrol.clock import utcnow
from devicecontrol.devices import service as devices
from devicecontrol.errors import InvalidField
from devicecontrol.runtime import Runtime

# period -> (how far back, the summary's bucket): each under a few hundred points
PERIODS: dict[str, tuple[timedelta, str]] = {
    "hour": (timedelta(hours=1), "1m"),
    "day": (timedelta(days=1), "15m"),
    "week": (timedelta(days=7), "1h"),
    "month": (timedelta(days=30), "1d"),
}
DEFAULT_PERIOD = "day"
ENERGY = "energy_wh"
ENERGY_DAYS = 30
STAMP = "%Y-%m-%d %H:%M:%S"  # the API's times, UTC


def _epoch(text: str) -> int:
    return int(datetime.strptime(text, STAMP).replace(tzinfo=UTC).timestamp())


def _value(value: Any) -> float | None:
    """A bucket's field: its average (a number's own value, as ``energy_wh`` is)."""
    if isinstance(value, dict):
        value = value.get("avg")
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def chart_series(
    buckets: list[dict[str, Any]], since: datetime, *, only: str | None = None
) -> dict[str, Any]:
    """uPlot's data: the period's start and end and the buckets' start times (epoch
    seconds), and one series per field."""
    names = sorted(
        {n for b in buckets for n in b if n not in ("start", "count") and n != ENERGY}
        if only is None
        else {only}
    )
    return {
        "from": int(since.replace(tzinfo=UTC).timestamp()),
        "to": int(utcnow().replace(tzinfo=UTC).timestamp()),
        "x": [_epoch(b["start"]) for b in buckets],
        "series": {name: [_value(b.get(name)) for b in buckets] for name in names},
    }


async def _summary(
    runtime: Runtime, user_id: int, serial_number: str, since: datetime, every: str
) -> list[dict[str, Any]]:
    _, buckets = await devices.readings_summary(
        runtime, user_id, serial_number, since=since.strftime(STAMP), until=None, every=every
    )
    return buckets


async def readings_chart(
    runtime: Runtime, user_id: int, serial_number: str, period: str
) -> dict[str, Any]:
    if period not in PERIODS:
        raise InvalidField("period", "must be one of " + ", ".join(PERIODS))
    back, every = PERIODS[period]
    since = utcnow() - back
    return chart_series(await _summary(runtime, user_id, serial_number, since, every), since)


async def energy_chart(runtime: Runtime, user_id: int, serial_number: str) -> dict[str, Any]:
    """A plug's energy per day (the owner's local days) over the last month."""
    since = utcnow() - timedelta(days=ENERGY_DAYS)
    buckets = await _summary(runtime, user_id, serial_number, since, "1d")
    return chart_series(buckets, since, only=ENERGY)
