"""The command lifecycle (contract §9): every status change in the service goes through
``transition`` (or the two bulk moves below), which applies the table of
``status.py`` in the UPDATE itself and counts the move in the metrics.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Row

from devicecontrol.database.engine import Writer
from devicecontrol.devices.commands import repository
from devicecontrol.devices.commands.status import (
    EXPIRED,
    FAILED,
    TERMINAL,
    UNFINISHED,
    CommandStatus,
    sources_of,
)
from devicecontrol.observability.metrics import COMMAND_TRANSITIONS

OWNER_CHANGED = "owner changed"


def shown_status(status: str, expires_at: datetime, now: datetime) -> CommandStatus:
    """What a read shows: an unfinished command past its time is expired, stored or not."""
    if status in UNFINISHED and expires_at <= now:
        return EXPIRED
    return CommandStatus(status)


async def transition(
    connection: Writer,
    command_id: int,
    target: CommandStatus,
    *,
    now: datetime,
    values: dict[str, Any] | None = None,
) -> Row[Any] | None:
    """Move one command to ``target`` if its stored status allows it and it has not expired.

    The condition is in the UPDATE itself, so of two racing changes (a result and an
    expiry, a result and a hand-over) exactly one wins. The command as it now is, or None
    when the move was refused.
    """
    changes = {"status": target, **(values or {})}
    if target in TERMINAL and "completed_at" not in changes:
        changes["completed_at"] = now
    moved = await repository.move_command(
        connection,
        command_id,
        from_statuses=sources_of(target),
        values=changes,
        unexpired_at=None if target == EXPIRED else now,
    )
    if moved is not None:
        COMMAND_TRANSITIONS.labels(target).inc()
    return moved


async def fail_all_for_owner_change(
    connection: Writer, controller_id: int, *, now: datetime
) -> list[Row[Any]]:
    """A hand-over or release: the unfinished commands of the old ownership end, failed
    (returned as they now are, for their events)."""
    failed = await repository.fail_unexpired(
        connection, controller_id, from_statuses=sources_of(FAILED), error=OWNER_CHANGED, now=now
    )
    _count(FAILED, len(failed))
    return failed


async def expire_all_overdue(
    connection: Writer, *, now: datetime, limit: int | None = None
) -> list[Row[Any]]:
    """Store ``expired`` for what reads already show as expired (housekeeping, and the
    link every second for the streams); ``limit`` caps one call, so that a purge can go
    in short transactions. The commands it expired, as they now are."""
    expired = await repository.expire_overdue(
        connection, from_statuses=sources_of(EXPIRED), now=now, limit=limit
    )
    _count(EXPIRED, len(expired))
    return expired


def _count(status: CommandStatus, commands: int) -> None:
    if commands:
        COMMAND_TRANSITIONS.labels(status).inc(commands)
