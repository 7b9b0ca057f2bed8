"""The command lifecycle (contract §9): its states and transitions, listed once.

queued -> sent -> succeeded | failed, and queued | sent -> expired once ``expires_at`` has
passed with no result, or -> failed when the controller changes hands. Terminal states
never change. Every status change in the service goes through ``transition`` (or the two
bulk moves below), which counts it in the metrics.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from devicecontrol.devices import repository
from devicecontrol.observability.metrics import COMMAND_TRANSITIONS

QUEUED, SENT, SUCCEEDED, FAILED, EXPIRED = "queued", "sent", "succeeded", "failed", "expired"
STATUSES = (QUEUED, SENT, SUCCEEDED, FAILED, EXPIRED)
UNFINISHED = frozenset({QUEUED, SENT})
TERMINAL = frozenset({SUCCEEDED, FAILED, EXPIRED})

# the allowed moves; anything else is refused
TRANSITIONS: dict[str, frozenset[str]] = {
    QUEUED: frozenset({SENT, FAILED, EXPIRED}),  # failed: the owner changed
    SENT: frozenset({SUCCEEDED, FAILED, EXPIRED}),  # a late "queued" never happens
    SUCCEEDED: frozenset(),
    FAILED: frozenset(),
    EXPIRED: frozenset(),
}
OWNER_CHANGED = "owner changed"


def shown_status(status: str, expires_at: datetime, now: datetime) -> str:
    """What a read shows: an unfinished command past its time is expired, stored or not."""
    if status in UNFINISHED and expires_at <= now:
        return EXPIRED
    return status


def sources_of(target: str) -> tuple[str, ...]:
    """The statuses from which ``target`` may be reached."""
    return tuple(source for source, targets in TRANSITIONS.items() if target in targets)


async def transition(
    connection: AsyncConnection,
    command_id: int,
    target: str,
    *,
    now: datetime,
    values: dict[str, Any] | None = None,
) -> bool:
    """Move one command to ``target`` if its stored status allows it and it has not expired.

    The condition is in the UPDATE itself, so of two racing changes (a result and an
    expiry, a result and a hand-over) exactly one wins. False when the move was refused.
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
    if moved:
        COMMAND_TRANSITIONS.labels(target).inc()
    return moved


async def fail_all_for_owner_change(
    connection: AsyncConnection, controller_id: int, *, now: datetime
) -> int:
    """A hand-over or release: the unfinished commands of the old ownership end, failed."""
    failed = await repository.fail_unexpired(
        connection, controller_id, from_statuses=sources_of(FAILED), error=OWNER_CHANGED, now=now
    )
    _count(FAILED, failed)
    return failed


async def expire_all_overdue(
    connection: AsyncConnection, *, now: datetime, limit: int | None = None
) -> int:
    """Store ``expired`` for what reads already show as expired (housekeeping); ``limit``
    caps one call, so that a purge can go in short transactions."""
    expired = await repository.expire_overdue(
        connection, from_statuses=sources_of(EXPIRED), now=now, limit=limit
    )
    _count(EXPIRED, expired)
    return expired


def _count(status: str, commands: int) -> None:
    if commands:
        COMMAND_TRANSITIONS.labels(status).inc(commands)
