"""The events' log (contract §11): what the live streams send, written by whoever makes
the change, in the change's own transaction, and announced once it has committed.

Why a table: every process holding a stream must see every event in one order, and a
stream resumed with ``Last-Event-ID`` (on any worker) must find what it missed. An event's
``id`` is its position; a stream sends its events in that order. Positions are handed
out in commit order: SQLite's write lock already serializes writing transactions, and on
PostgreSQL ``append`` takes a transaction-level advisory lock first, so that no event can
commit behind one with a higher id that a stream already sent.

An announcement carries the newest position only; every process with open streams then
reads what follows its own position once (one read per batch of events, never one per
event), and reads anyway every POLL_S in case an announcement was lost.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

import msgspec
from sqlalchemy import bindparam, delete, func, insert, select, text

from devicecontrol.clock import format_timestamp, utcnow
from devicecontrol.database.engine import Writer
from devicecontrol.database.tables import events
from devicecontrol.notifications import EVENTS_LOGGED, Change, Changes

# how long a position stays resumable: the contract promises 5 minutes at least
EVENT_RETENTION = timedelta(minutes=10)
# one transaction of the purge: short, so that it never holds SQLite's write lock long
PURGE_BATCH = 5_000
# on PostgreSQL, appends take this lock until they commit: positions in commit order
APPEND_LOCK = 0x6576656E7473  # "events"

_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder().decode


class EventKind(StrEnum):
    ONLINE = "online"
    READING = "reading"
    COMMAND = "command"
    # an owner change, one row for each user it concerns (``user_id``): the stream of the
    # new owner gains the controller, the old owner's streams lose it (``end``)
    GAINED = "gained"
    LOST = "lost"


@dataclass(frozen=True, slots=True)
class NewEvent:
    controller_id: int
    kind: EventKind
    data: str  # the JSON of the data line
    user_id: int | None = None


def online(controller_id: int, serial_number: str, is_online: bool) -> NewEvent:
    data = _encode({"serial_number": serial_number, "online": is_online}).decode()
    return NewEvent(controller_id, EventKind.ONLINE, data)


def online_changes(changed: Sequence[tuple[int, str, bool]]) -> list[NewEvent]:
    """From (controller id, serial number, online) triples."""
    return [
        online(controller_id, serial, is_online) for controller_id, serial, is_online in changed
    ]


def reading(controller_id: int, serial_number: str, payload: str, created: datetime) -> NewEvent:
    """As ``controller_log`` shows it: the reported fields plus ``created``."""
    shown = {**_decode(payload), "created": format_timestamp(created)}
    data = _encode({"serial_number": serial_number, "reading": shown}).decode()
    return NewEvent(controller_id, EventKind.READING, data)


def command(controller_id: int, serial_number: str, shown: dict[str, Any]) -> NewEvent:
    """``shown``: the command as its read shows it, timestamps formatted, without the
    ``_links`` the stream adds."""
    data = _encode({"serial_number": serial_number, "command": shown}).decode()
    return NewEvent(controller_id, EventKind.COMMAND, data)


def gained(controller_id: int, serial_number: str, user_id: int, is_online: bool) -> NewEvent:
    data = _encode({"serial_number": serial_number, "online": is_online}).decode()
    return NewEvent(controller_id, EventKind.GAINED, data, user_id)


def lost(controller_id: int, serial_number: str, user_id: int, reason: str) -> NewEvent:
    data = _encode({"serial_number": serial_number, "reason": reason}).decode()
    return NewEvent(controller_id, EventKind.LOST, data, user_id)


async def append(connection: Writer, new: Sequence[NewEvent]) -> int | None:
    """Log ``new`` in the caller's transaction; the newest position, for ``announce``
    once the transaction has committed (None: nothing logged)."""
    if not new:
        return None
    postgresql = connection.dialect.name == "postgresql"
    if postgresql and len(new) == 1:
        return await _append_one_locked(connection, new[0])
    if postgresql:
        await connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": APPEND_LOCK})
    now = utcnow()
    rows = [
        {
            "controller_id": event.controller_id,
            "kind": event.kind.value,
            "user_id": event.user_id,
            "data": event.data,
            "created_at": now,
        }
        for event in new
    ]
    # under the lock (or SQLite's): the newest position is this transaction's last. One
    # event (a command's) returns it from its INSERT; a batch (readings) is one prepared
    # INSERT run for each row, whose RETURNING form would be a new statement per batch size
    if len(rows) == 1:
        return int(
            (await connection.execute(insert(events).returning(events.c.id), rows[0])).scalar_one()
        )
    await connection.execute(insert(events), rows)
    newest: int = (await connection.execute(select(func.max(events.c.id)))).scalar_one()
    return newest


# one event on PostgreSQL: the lock and the row in one statement (a round trip fewer for
# each command's event). The CTE holds a volatile function, so PostgreSQL runs it once and
# before the row it feeds: the lock is held before the row's id is drawn from its sequence
_LOCK_THEN_ONE_EVENT = (
    insert(events)
    .from_select(
        ["controller_id", "kind", "user_id", "data", "created_at"],
        select(
            bindparam("controller_id", type_=events.c.controller_id.type),
            bindparam("kind", type_=events.c.kind.type),
            bindparam("user_id", type_=events.c.user_id.type),
            bindparam("data", type_=events.c.data.type),
            bindparam("created_at", type_=events.c.created_at.type),
        ).select_from(
            select(func.pg_advisory_xact_lock(bindparam("key")).label("locked")).cte("locked")
        ),
    )
    .returning(events.c.id)
)


async def _append_one_locked(connection: Writer, event: NewEvent) -> int:
    row = {
        "key": APPEND_LOCK,
        "controller_id": event.controller_id,
        "kind": event.kind.value,
        "user_id": event.user_id,
        "data": event.data,
        "created_at": utcnow(),
    }
    return int((await connection.execute(_LOCK_THEN_ONE_EVENT, row)).scalar_one())


async def announce(changes: Changes, newest: int | None = 0) -> None:
    """Tell every process with streams that the log grew, to ``newest`` (0: unknown; None:
    it did not), once the transaction has committed."""
    if newest is not None:
        await changes.announce(Change(EVENTS_LOGGED, 0, newest))


class Announcer:
    """Announces the newest position in the background, one announcement in flight at a
    time and the newest position only: the link's writers commit many batches a second and
    need not wait for each NOTIFY (or a reconnect of its connection after an outage)."""

    def __init__(self, changes: Changes) -> None:
        self._changes = changes
        self._newest = 0
        self._pending = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def announce(self, newest: int | None) -> None:
        if newest is None:
            return
        self._newest = max(self._newest, newest)
        self._pending.set()
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run(), name="events: announcer")

    async def _run(self) -> None:
        while True:
            await self._pending.wait()
            self._pending.clear()
            await self._changes.announce(Change(EVENTS_LOGGED, 0, self._newest))

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


async def purge(
    connection: Writer, *, now: datetime | None = None, limit: int = PURGE_BATCH
) -> int:
    """Forget one batch of events older than EVENT_RETENTION; the newest event always
    stays, so that the oldest position kept tells a resumable id from a gap."""
    horizon = (now or utcnow()) - EVENT_RETENTION
    newest = select(func.max(events.c.id)).scalar_subquery()
    batch = (
        select(events.c.id)
        .where(events.c.created_at < horizon, events.c.id < newest)
        .order_by(events.c.id)
        .limit(limit)
        .scalar_subquery()
    )
    result = await connection.execute(delete(events).where(events.c.id.in_(batch)))
    return result.rowcount
