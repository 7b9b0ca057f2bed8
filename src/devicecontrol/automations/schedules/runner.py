"""Firing schedules: every ``serve`` process runs ``fire_schedules_periodically``.

Each firing is claimed in the database (``repository.claim_firing``), in the transaction
that makes its command, so it happens exactly once whatever the number of processes, and
across restarts: a firing that was due while no process ran is found at start-up, fired if
it is at most ``DEVICECONTROL_SCHEDULE_GRACE`` seconds late, else skipped and counted. A
process sleeps until the earliest firing it knows of, and looks again at least every
``DEVICECONTROL_SCHEDULE_CHECK`` seconds for schedules other processes wrote.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Row

from devicecontrol.automations import shared as automations
from devicecontrol.automations.schedules import repository, service, timing
from devicecontrol.clock import utcnow
from devicecontrol.database.engine import Writer
from devicecontrol.devices.commands import service as commands
from devicecontrol.devices.commands.service import OwnedDevice
from devicecontrol.errors import TooManyRequests, is_database_outage
from devicecontrol.observability.metrics import SCHEDULE_FIRINGS, SCHEDULE_SKIPS
from devicecontrol.runtime import Runtime

DUE_BATCH = 100
FIRED, LATE, TOO_MANY_COMMANDS, NOT_OWNED = "fired", "late", "too_many_commands", "not_owned"
logger = logging.getLogger("devicecontrol.schedules")


class SkipLog:
    """Skipped firings in the log once per episode and reason: the first, then how many
    more once a pass over the due firings skips none for that reason (a thousand schedules
    of one minute skipped for one cause are two lines, not a thousand). The metrics count
    each one."""

    def __init__(self) -> None:
        self._more: dict[str, int] = {}  # reason -> skipped since its first was logged
        self._seen: set[str] = set()  # reasons skipped in the pass under way

    def skipped(self, schedule_id: int, kind: str, at: datetime, reason: str) -> None:
        self._seen.add(reason)
        if reason in self._more:
            self._more[reason] += 1
            return
        self._more[reason] = 0
        logger.info(
            "schedule %d: %s firing of %s skipped (%s); more skipped for the same reason are "
            "counted and logged once they stop",
            schedule_id, kind, at, reason,
        )  # fmt: skip

    def pass_ended(self) -> None:
        for reason in [r for r in self._more if r not in self._seen]:
            more = self._more.pop(reason)
            if more:
                logger.info("%d more schedule firings were skipped (%s)", more, reason)
        self._seen.clear()


_skips = SkipLog()


@dataclass(frozen=True, slots=True)
class Firing:
    """What became of one claimed firing: FIRED (with its command) or why it was skipped."""

    schedule_id: int
    kind: str
    outcome: str
    command_id: str | None = None


def _command_of(row: Row[Any], kind: str) -> tuple[str, dict[str, Any]]:
    if kind == timing.START:
        return row.command_name, automations.stored_fields(row.command_fields)
    return row.end_command_name, automations.stored_fields(row.end_command_fields)


def _following(row: Row[Any]) -> tuple[datetime | None, str | None]:
    """The firing after the one due (naive UTC, kind), or none."""
    found = timing.next_firing(
        service.timetable(row), timing.as_aware_utc(row.next_fire_at), row.next_kind
    )
    return (None, None) if found is None else (timing.as_naive_utc(found[0]), found[1])


async def _make_command(
    runtime: Runtime,
    connection: Writer,
    row: Row[Any],
    device: OwnedDevice | None,
    now: datetime,
) -> tuple[str, Row[Any] | None]:
    """In the claim's transaction: the firing's command, or why there is none."""
    if now - row.next_fire_at > timedelta(seconds=runtime.settings.schedule_grace_s):
        return LATE, None
    if device is None:  # handed over as it fired (which deletes it), or the owner disabled
        return NOT_OWNED, None
    name, params = _command_of(row, row.next_kind)
    ttl_s = runtime.settings.command_ttl_s
    try:
        command = await commands.insert_queued(
            connection, device, name=name, params=params, ttl_s=ttl_s
        )
    except TooManyRequests:
        return TOO_MANY_COMMANDS, None
    await repository.record_firing(connection, row.id, fired_at=now, command_id=command.public_id)
    await commands.log_made(connection, device, command)  # last: events/log.py
    return FIRED, command


async def fire_one(runtime: Runtime, row: Row[Any], now: datetime) -> Firing | None:
    """Claim the schedule's due firing and make its command (or skip it, when late past
    the grace); None when another process claimed it first."""
    at, kind = row.next_fire_at, row.next_kind
    next_at, next_kind = _following(row)
    async with runtime.database.write() as connection:
        # the controller first, as a hand-over locks it (automations.owned_device_now)
        device = await automations.owned_device_now(connection, row.controller_id, row.user_id)
        claimed = await repository.claim_firing(
            connection, row.id, at=at, kind=kind, next_at=next_at, next_kind=next_kind
        )
        if not claimed:
            return None
        outcome, command = await _make_command(runtime, connection, row, device, now)
    if command is None:  # counted once the claim is committed
        SCHEDULE_SKIPS.labels(outcome).inc()
        _skips.skipped(row.id, kind, at, outcome)
        return Firing(row.id, kind, outcome)
    SCHEDULE_FIRINGS.labels(kind).inc()
    await commands.announce_made(runtime, command)
    return Firing(row.id, kind, outcome, command.public_id)


async def fire_due(runtime: Runtime, now: datetime | None = None) -> list[Firing]:
    """Fire (or skip) every firing due by ``now``, the missed ones of a long stop included:
    each claim moves its schedule on to the next firing, until none is due."""
    now = now or utcnow()
    done: list[Firing] = []
    while True:
        async with runtime.database.read() as connection:
            rows = await repository.due(connection, now, limit=DUE_BATCH)
        if not rows:
            _skips.pass_ended()
            return done
        for row in rows:
            firing = await fire_one(runtime, row, now)
            if firing is not None:
                done.append(firing)


async def seconds_until_next(runtime: Runtime) -> float:
    """How long this process may sleep: until the earliest firing, at most the check."""
    async with runtime.database.read() as connection:
        earliest = await repository.earliest_firing(connection)
    wait = float(runtime.settings.schedule_check_s)
    if earliest is not None:
        wait = min(wait, (earliest - utcnow()).total_seconds())
    return max(0.05, wait)


async def fire_schedules_periodically(runtime: Runtime) -> None:
    """Fire due schedules until cancelled, from start-up on. A failure is retried at the
    next check, never fatal; a database outage is logged once, without a traceback (it is
    no bug), and its end once."""
    failing = False
    while True:
        wait = float(runtime.settings.schedule_check_s)
        try:
            await fire_due(runtime)
            wait = await seconds_until_next(runtime)
        except Exception as exc:
            if not is_database_outage(exc):
                logger.error("firing schedules failed; retrying in %.0f s", wait, exc_info=exc)
            elif not failing:
                logger.warning(
                    "database unavailable: schedules wait for it (%s)", type(exc).__name__
                )
            failing = True
        else:
            if failing:
                logger.info("database back: schedules fire again")
            failing = False
        await asyncio.sleep(wait)
