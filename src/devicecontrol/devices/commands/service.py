"""Commands as users make and see them, and as the device link delivers and completes them.

A command is a row: it survives restarts and reaches the device whichever ``serve`` worker
made it (the link delivers from the table). Users see the commands of the current
ownership only.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import msgspec
from sqlalchemy import Row

from devicecontrol.clock import format_timestamp, monotonic, utcnow
from devicecontrol.controllers.identity import is_serial_number
from devicecontrol.database.engine import Writer
from devicecontrol.database.pages import Page, PageRequest
from devicecontrol.devices import repository
from devicecontrol.devices.catalogue import checked_params
from devicecontrol.devices.commands import lifecycle
from devicecontrol.devices.commands import repository as commands_repository
from devicecontrol.devices.commands import status as command_status
from devicecontrol.errors import NotFound, TooManyRequests
from devicecontrol.events import log as events_log
from devicecontrol.notifications import COMMAND_MADE, EVENTS_LOGGED, Change
from devicecontrol.runtime import Runtime

MAX_UNFINISHED = 100
MIN_TTL_S, MAX_TTL_S = 1, 86400
_encode = msgspec.json.encode
_decode = msgspec.json.decode


@dataclass(frozen=True, slots=True)
class OwnedDevice:
    controller_id: int
    assignment_id: int
    type: str
    online: bool
    serial_number: str


@dataclass(frozen=True, slots=True)
class LatestReading:
    assignment_id: int | None  # the ownership it arrived under
    payload: str


def not_yours(serial_number: str) -> NotFound:
    return NotFound(f"No controller with serial number {serial_number} is assigned to you.")


async def owned_device(runtime: Runtime, user_id: int, serial_number: str) -> OwnedDevice:
    """The caller's controller and its current ownership, or the usual 404."""
    device, _ = await _owned(runtime, user_id, serial_number, with_reading=False)
    return device


async def owned_device_and_reading(
    runtime: Runtime, user_id: int, serial_number: str
) -> tuple[OwnedDevice, LatestReading | None]:
    """``owned_device`` and the device's latest reading (whoever it arrived under), in one
    statement."""
    return await _owned(runtime, user_id, serial_number, with_reading=True)


async def _owned(
    runtime: Runtime, user_id: int, serial_number: str, *, with_reading: bool
) -> tuple[OwnedDevice, LatestReading | None]:
    if not is_serial_number(serial_number):
        raise not_yours(serial_number)
    async with runtime.database.read() as connection:
        row = await repository.find_owned_device(
            connection, user_id, serial_number, with_reading=with_reading
        )
    if row is None or row.assignment_id is None:
        raise not_yours(serial_number)
    device = OwnedDevice(row.id, row.assignment_id, row.type, bool(row.online), serial_number)
    if not with_reading or row.reading_payload is None:
        return device, None
    return device, LatestReading(row.reading_assignment_id, row.reading_payload)


async def create_command(
    runtime: Runtime,
    device: OwnedDevice,
    *,
    name: str,
    fields: Mapping[str, Any],
    ttl_s: int,
    strict: bool,
    name_field: str = "name",
) -> Row[Any]:
    """Check the command against the type's catalogue and store it, queued."""
    params = checked_params(device.type, name, fields, name_field=name_field, strict=strict)
    async with runtime.database.write() as connection:
        command = await insert_queued(connection, device, name=name, params=params, ttl_s=ttl_s)
        await log_made(connection, device, command)
    await announce_made(runtime, command)
    return command


async def insert_queued(
    connection: Writer,
    device: OwnedDevice,
    *,
    name: str,
    params: Mapping[str, Any],
    ttl_s: int,
) -> Row[Any]:
    """Store a command whose params ``checked_params`` returned, queued, in the caller's
    transaction (automations claim their firing in the same one); the caller logs its event
    last in that transaction (``log_made``) and announces it once it commits
    (``announce_made``). TooManyRequests past MAX_UNFINISHED."""
    now = utcnow()
    if (
        await commands_repository.count_unfinished(connection, device.controller_id, now)
        >= MAX_UNFINISHED
    ):
        raise TooManyRequests(
            f"The controller has {MAX_UNFINISHED} unfinished commands; wait for them.",
            retry_after_s=5,
        )
    return await commands_repository.insert_command(
        connection,
        {
            "public_id": secrets.token_hex(12),
            "controller_id": device.controller_id,
            "assignment_id": device.assignment_id,
            "name": name,
            "params": _encode(params).decode(),
            "status": command_status.QUEUED,
            "created_at": now,
            "expires_at": now + timedelta(seconds=ttl_s),
        },
    )


async def log_made(connection: Writer, device: OwnedDevice, command: Row[Any]) -> None:
    """The new command's event, for its owner's streams: the last statement of the
    transaction that made it (events/log.py: the log's lock is taken last)."""
    await events_log.append(connection, [command_event(device.serial_number, command)])


async def announce_made(runtime: Runtime, command: Row[Any]) -> None:
    """A committed command: the device link (whichever process runs it) delivers it now,
    and the processes with streams read its event."""
    await runtime.changes.announce(Change(COMMAND_MADE, command.controller_id, command.id))


def command_event(serial_number: str, command: Row[Any]) -> events_log.NewEvent:
    """The command as its read shows it now, for the streams (which add ``_links``)."""
    shown_now = shown(command)
    for moment in ("created", "sent_at", "completed_at", "expires_at"):
        shown_now[moment] = format_timestamp(shown_now[moment])
    return events_log.command(command.controller_id, serial_number, shown_now)


async def log_changed(connection: Writer, serial_number: str, command: Row[Any]) -> None:
    """A command's status changed in this transaction: its event, from the command as
    ``transition`` returned it."""
    await events_log.append(connection, [command_event(serial_number, command)])


async def get_command(runtime: Runtime, device: OwnedDevice, public_id: str) -> Row[Any]:
    async with runtime.database.read() as connection:
        command = await commands_repository.find_command(
            connection, device.controller_id, public_id
        )
    if command is None or command.assignment_id != device.assignment_id:
        raise NotFound(f"No command {public_id} of this controller is yours.")
    return command


async def wait_until_finished(
    runtime: Runtime, device: OwnedDevice, command: Row[Any], *, timeout_s: float
) -> Row[Any]:
    """The command once it is finished, or as it stands after ``timeout_s``.

    Woken by the announcement of its result (the link stores it, in whatever process);
    read again every ``DEVICECONTROL_COMMAND_SWEEP`` seconds in case one was lost, and
    once more at the end.
    """
    deadline = monotonic() + timeout_s
    sweep_s = runtime.settings.command_sweep_s
    with runtime.changes.finished(command.id) as finished:
        await runtime.changes.start()  # this process hears announcements from now on
        # a result announced before this listened is in the table: one read finds it
        command = await get_command(runtime, device, command.public_id)
        while lifecycle.shown_status(command.status, command.expires_at, utcnow()) in (
            command_status.UNFINISHED
        ):
            remaining = deadline - monotonic()
            if remaining <= 0:
                break
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(finished.wait(), min(sweep_s, remaining))
            finished.clear()
            command = await get_command(runtime, device, command.public_id)
    return command


async def list_commands(runtime: Runtime, device: OwnedDevice, paging: PageRequest) -> Page:
    async with runtime.database.read() as connection:
        total = await commands_repository.count_commands(
            connection, device.controller_id, device.assignment_id
        )
        rows = []
        if paging.offset < total:  # past the end (or past what OFFSET holds): no query
            rows = await commands_repository.list_commands(
                connection,
                device.controller_id,
                device.assignment_id,
                offset=paging.offset,
                limit=paging.page_size,
            )
    return Page(rows=rows, total=total, page_count=paging.page_count(total))


def shown(command: Row[Any], now: datetime | None = None) -> dict[str, Any]:
    """The command as the API shows it (status as of now)."""
    return {
        "id": command.public_id,
        "name": command.name,
        "params": _decode(command.params),
        "status": lifecycle.shown_status(command.status, command.expires_at, now or utcnow()),
        "created": command.created_at,
        "sent_at": command.sent_at,
        "completed_at": command.completed_at,
        "expires_at": command.expires_at,
        "result": None if command.result is None else _decode(command.result),
        "error": command.error,
    }


async def expire_overdue(connection: Writer, *, now: datetime, limit: int | None = None) -> int:
    """Store ``expired`` for commands whose time is up, with their events (the link every
    second, housekeeping in its purge); how many."""
    expired = await lifecycle.expire_all_overdue(connection, now=now, limit=limit)
    if expired:
        serials = await repository.serial_numbers(connection, {c.controller_id for c in expired})
        await events_log.append(
            connection, [command_event(serials[c.controller_id], c) for c in expired]
        )
    return len(expired)


# --- the device side --------------------------------------------------------------------


def delivery_payload(command: Row[Any]) -> bytes:
    """What the device gets on ``devices/<sn>/commands``."""
    return _encode(
        {
            "id": command.public_id,
            "name": command.name,
            "params": _decode(command.params),
            "expires_at": command.expires_at.strftime("%Y-%m-%d %H:%M:%S"),
        }
    )


async def mark_sent(runtime: Runtime, serial_number: str, command: Row[Any]) -> bool:
    """Record a publication; False if the command finished or expired meanwhile (not sent)."""
    if command.status == command_status.SENT:
        return True  # a redelivery after a reconnect: already sent
    async with runtime.database.write() as connection:
        moved = await lifecycle.transition(
            connection, command.id, command_status.SENT, now=utcnow(), values={"sent_at": utcnow()}
        )
        if moved is not None:
            await log_changed(connection, serial_number, moved)
    if moved is None:
        return False
    await runtime.changes.announce(Change(EVENTS_LOGGED, command.controller_id, 0))
    return True


@dataclass(frozen=True, slots=True)
class ResultOutcome:
    """How a device's result went: ``dropped`` names why it was not taken (for metrics)."""

    command: Row[Any] | None
    dropped: str | None = None


async def record_result(
    runtime: Runtime, controller_id: int, serial_number: str, result: Mapping[str, Any]
) -> ResultOutcome:
    """A device reports how a command of its own ended; late, unknown or repeated ones are
    dropped (terminal states never change). A well-formed report counts as ``last_seen``."""
    public_id, status = result.get("id"), result.get("status")
    if not isinstance(public_id, str) or status not in command_status.RESULTS:
        return ResultOutcome(None, "malformed")
    outcome, error = result.get("result"), result.get("error")
    if outcome is not None and not isinstance(outcome, dict):
        return ResultOutcome(None, "malformed")
    if error is not None and not isinstance(error, str):
        return ResultOutcome(None, "malformed")
    now = utcnow()
    async with runtime.database.write() as connection:
        await repository.touch_last_seen(connection, controller_id, now)  # heard from it
        command = await commands_repository.find_command(connection, controller_id, public_id)
        if command is None:
            return ResultOutcome(None, "unknown_command")
        moved = await lifecycle.transition(
            connection,
            command.id,
            status,
            now=now,
            values={
                "result": None if outcome is None else _encode(outcome).decode(),
                "error": None if error is None else error[:500],
            },
        )
        if moved is not None:
            await log_changed(connection, serial_number, moved)
    if moved is None:
        return ResultOutcome(command, "late_result")
    return ResultOutcome(command)
