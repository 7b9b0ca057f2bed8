"""Schedules in tests: made through the service, fired by calling the runner directly."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Row

from devicecontrol.automations.schedules import service
from devicecontrol.clock import use_time_source
from devicecontrol.observability.metrics import SCHEDULE_FIRINGS, SCHEDULE_SKIPS
from devicecontrol.runtime import Runtime
from tests.fake_time import FakeClock

PLUG_ON = {"command_name": "switch_on_off", "command_fields": {"state": "on"}}
PLUG_OFF = {"end_command_name": "switch_on_off", "end_command_fields": {"state": "off"}}


@contextmanager
def clock_at(*moment: int) -> Iterator[FakeClock]:
    """Time in this process stands at that UTC moment until the test moves it."""
    fake = FakeClock(datetime(*moment, tzinfo=UTC))
    previous = use_time_source(fake)
    try:
        yield fake
    finally:
        use_time_source(previous)


async def make_schedule(runtime: Runtime, user_id: int, **fields: Any) -> Row:
    body = {"controller_id": "PLUG1", "days": "1111111", "from_time": "07:00", **PLUG_ON}
    return await service.create_schedule(runtime, user_id, {**body, **fields})


async def reread(runtime: Runtime, row: Row) -> Row:
    return await service.get_schedule(runtime, row.user_id, row.serial_number, str(row.id))


def firings(kind: str) -> float:
    return SCHEDULE_FIRINGS.labels(kind)._value.get()


def skips(reason: str) -> float:
    return SCHEDULE_SKIPS.labels(reason)._value.get()
