"""A process's end of the events: it reads the log once for all its streams and hands each
event to the streams it concerns.

The hub reads what follows its ``position`` when an announcement says the log grew, and
every POLL_S anyway (a lost announcement costs at most that). A stream joins at the
hub's position: one that opened behind it first reads the difference itself
(``catch_up``), one ahead of it skips what it already has (``Stream.skip_upto``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import threading
from collections import deque
from collections.abc import Awaitable, Callable
from types import FrameType
from typing import Any

from devicecontrol.clock import monotonic
from devicecontrol.events import repository, slots
from devicecontrol.events.log import EventKind
from devicecontrol.events.stream import Ended, Stream
from devicecontrol.notifications import EVENTS_LOGGED, Change
from devicecontrol.observability.metrics import EVENT_STREAMS_OPEN
from devicecontrol.runtime import Runtime

POLL_S = 1.0
READ_BATCH = 5_000
# the newest events, kept in memory: a stream that joins a little behind the hub (it read
# its controllers a few milliseconds ago) catches up from here, not from the database
RECENT = 10_000
# stream openings (and their slots' bookkeeping) under way at once in a process: a burst
# of them (every client back after a restart) waits here, in order, rather than for a
# database connection, which gives up after a second (503); below the pools' size (5),
# so that the other requests always find one
OPENING_AT_ONCE = 3
logger = logging.getLogger("devicecontrol.events")


class Hub:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.position = 0  # every event up to here has been handed out
        self._streams: dict[Stream, int] = {}  # -> its slot (events/slots.py)
        # lists, not sets: nearly always one stream per controller (a set is 4x the size)
        self._by_controller: dict[int, list[Stream]] = {}
        self._by_user: dict[int, list[Stream]] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._chores: set[asyncio.Task[None]] = set()
        self._recent: deque[Any] = deque(maxlen=RECENT)
        self.opening = asyncio.Semaphore(OPENING_AT_ONCE)
        self._listening = False

    async def start(self, *, end_streams_on_stop: bool = False) -> None:
        """The app's start-up: the hub hears announcements from its first stream on (an app
        that never holds one opens no listening connection). With ``end_streams_on_stop`` (a
        ``serve`` worker), SIGTERM and SIGINT end every stream at once: uvicorn drains
        the requests in flight before anything else hears of the stop, and a stream
        would hold the drain for its whole graceful timeout. Its clients resume, with
        ``Last-Event-ID``, on another process."""
        if end_streams_on_stop and threading.current_thread() is threading.main_thread():
            loop = asyncio.get_running_loop()
            for signum in (signal.SIGTERM, signal.SIGINT):
                previous = signal.getsignal(signum)
                end_all = _chained(previous, lambda: loop.call_soon_threadsafe(self.end_all))
                signal.signal(signum, end_all)

    def end_all(self) -> None:
        for stream in list(self._streams):
            stream.end(Ended.SHUTDOWN)

    async def close(self) -> None:
        self.runtime.changes.remove_listener(self._heard)
        self.end_all()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await asyncio.gather(*self._chores, return_exceptions=True)

    # --- streams joining and leaving -----------------------------------------------------

    async def join(self, stream: Stream, position: int, slot: int) -> None:
        """Add ``stream``, which has everything up to ``position``."""
        if not self._listening:
            self._listening = True
            self.runtime.changes.add_listener(self._heard)
            await self.runtime.changes.start()
        while self._streams and self.position > position:  # what it lacks
            if self._recent and self._recent[0].id <= position + 1:
                for event in self._recent:  # all in memory: no await, so none is missed
                    if event.id > position:
                        stream.offer(event)
                position = self.position
                break
            upto = self.position  # further behind than memory holds: from the log
            await catch_up(self.runtime, stream, position, upto)
            position = upto
        if not self._streams:
            self.position = position
            self._recent.clear()
        stream.skip_upto = max(stream.skip_upto, position)
        self._streams[stream] = slot
        _add(self._by_user, stream.user_id, stream)
        for controller_id in stream.controllers:
            _add(self._by_controller, controller_id, stream)
        EVENT_STREAMS_OPEN.inc()
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run(), name="events: hub")

    def leave(self, stream: Stream) -> None:
        slot = self._streams.pop(stream, None)
        if slot is None:
            return
        EVENT_STREAMS_OPEN.dec()
        _discard(self._by_user, stream.user_id, stream)
        for controller_id in stream.controllers:
            _discard(self._by_controller, controller_id, stream)
        self.give_back(slot)

    def give_back(self, slot: int) -> None:
        """Free a stream's slot (in the background: the stream has ended)."""
        self._chore(self._in_turn(slots.give_back(self.runtime, [slot])))

    async def _in_turn(self, work: Awaitable[None]) -> None:
        async with self.opening:
            await work

    # --- reading the log ------------------------------------------------------------------

    def _heard(self, change: Change) -> None:
        if (
            change.kind != EVENTS_LOGGED
            or change.subject_id > self.position
            or not change.subject_id
        ):
            self._wake.set()  # commands made and finished are logged events too

    async def _run(self) -> None:
        touch_at = monotonic() + slots.TOUCH_EVERY_S
        while self._streams:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), POLL_S)
            self._wake.clear()
            try:
                await self._read()
            except Exception:
                logger.warning("cannot read the events' log; trying again", exc_info=True)
                await asyncio.sleep(POLL_S)
            if monotonic() >= touch_at:
                touch_at = monotonic() + slots.TOUCH_EVERY_S
                self._chore(self._in_turn(slots.touch(self.runtime, list(self._streams.values()))))

    async def _read(self) -> None:
        while self._streams:
            async with self.runtime.database.read() as connection:
                rows = await repository.events_after(connection, self.position, READ_BATCH)
            for row in rows:
                self._hand_out(row)
            self._recent.extend(rows)
            if rows:
                self.position = rows[-1].id
            if len(rows) < READ_BATCH:
                return

    def _hand_out(self, event: Any) -> None:
        if event.kind in (EventKind.GAINED, EventKind.LOST):
            concerned = self._by_user.get(event.user_id, ())
        else:
            concerned = self._by_controller.get(event.controller_id, ())
        for stream in list(concerned):
            stream.offer(event)
            following = event.controller_id in stream.controllers
            if following:
                _add(self._by_controller, event.controller_id, stream)
            else:
                _discard(self._by_controller, event.controller_id, stream)

    def _chore(self, work: Any) -> None:
        task = asyncio.ensure_future(work)
        self._chores.add(task)
        task.add_done_callback(self._chore_done)

    def _chore_done(self, task: asyncio.Task[None]) -> None:
        self._chores.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.warning("an event stream's bookkeeping failed", exc_info=task.exception())


async def catch_up(runtime: Runtime, stream: Stream, after: int, upto: int) -> None:
    """Offer ``stream`` its events in (after, upto], read from the log; when it gains a
    controller on the way, it reads on from there with that one too."""
    while after < upto:
        async with runtime.database.read() as connection:
            rows = await repository.events_between(
                connection, after, upto, list(stream.controllers), stream.user_id, READ_BATCH
            )
        following = set(stream.controllers)
        for row in rows:
            stream.offer(row)
            after = row.id
            if stream.controllers - following:
                break  # its events from here on were not in this read
        else:
            if len(rows) < READ_BATCH:
                return


async def owned_before(
    runtime: Runtime, user_id: int, owned_now: set[int], after: int, upto: int
) -> set[int]:
    """The controllers ``user_id`` owned at position ``after``, from those owned at ``upto``
    and the owner changes between (a resumed stream replays only its own events)."""
    owned = set(owned_now)
    changes: list[Any] = []
    while True:
        async with runtime.database.read() as connection:
            rows = await repository.events_between(connection, after, upto, [], user_id, READ_BATCH)
        changes.extend(rows)
        if len(rows) < READ_BATCH:
            break
        after = rows[-1].id
    for row in reversed(changes):  # undo them, newest first
        if row.kind == EventKind.GAINED:
            owned.discard(row.controller_id)
        elif row.kind == EventKind.LOST:
            owned.add(row.controller_id)
    return owned


def _chained(previous: Any, first: Callable[[], object]) -> Callable[[int, FrameType | None], None]:
    """A signal handler that calls ``first``, then the handler it replaces."""

    def handle(signum: int, frame: FrameType | None) -> None:
        first()
        if callable(previous):
            previous(signum, frame)

    return handle


def _add(index: dict[int, list[Stream]], key: int, stream: Stream) -> None:
    streams = index.setdefault(key, [])
    if stream not in streams:
        streams.append(stream)


def _discard(index: dict[int, list[Stream]], key: int, stream: Stream) -> None:
    streams = index.get(key)
    if streams is not None and stream in streams:
        streams.remove(stream)
        if not streams:
            del index[key]
