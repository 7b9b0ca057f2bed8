"""Device messages to the database in batches (group commit), acknowledged only after.

Every accepted ``state`` message joins the readings queue, every ``commands/result`` the
results queue, in arrival order; together they are bounded. Two writers store them side
by side: the results', each in a transaction of its own (a command's round trip waits on
it, and a result is one row), and the readings', up to ``BATCH`` of what has gathered in
one transaction (one multi-row INSERT, each controller's latest reading and ``last_seen``
written once), after any online and offline noted meanwhile.
A message's future is resolved once its transaction has committed; the broker sends the
PUBACK of a QoS 1 message only then (contract §9, Readings).

While the queue is full the broker reads nothing more from device sockets (``room``):
TCP flow control holds the devices back, instead of the service acknowledging and then
dropping. When the database fails, what was not committed stays at the head of the queue
and is tried again; none of it is acknowledged meanwhile. Said once in the log, and in
the metrics (``devicecontrol_device_ingest_failing``).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any, Generic, TypeVar

from devicecontrol.clock import arrival_time, utcnow
from devicecontrol.database.engine import Writer
from devicecontrol.devices import repository
from devicecontrol.devices.commands import service as commands
from devicecontrol.devices.identity import DeviceIdentity
from devicecontrol.devices.link.field_budget import FieldBudget
from devicecontrol.devices.link.limits import drop
from devicecontrol.devices.link.outage import Outage
from devicecontrol.devices.link.outbox import RoundTrips
from devicecontrol.devices.readings import repository as readings_repository
from devicecontrol.devices.readings import service as readings
from devicecontrol.devices.readings.repository import ArrivedReading
from devicecontrol.devices.readings.service import RejectedPayload
from devicecontrol.devices.topics import MessageKind
from devicecontrol.events import log as events_log
from devicecontrol.notifications import COMMAND_FINISHED, Change
from devicecontrol.observability.metrics import DEVICE_INGEST_FAILING, DEVICE_INGEST_QUEUED
from devicecontrol.runtime import Runtime

CAPACITY = 20_000  # messages waiting for the database, all devices together
BATCH = 1_000  # the most one transaction takes
# group commit: a writer that wakes to fewer readings than GATHER_ENOUGH waits GATHER_S for
# more. Through Mosquitto the readings arrive one per turn of the loop: without the wait
# each would be a transaction of its own (batches of about one reading at 3,333/s), whose
# fixed cost holds the link at a full core
GATHER_S = 0.002
GATHER_ENOUGH = 100
RETRY_S = 0.5  # after a failed transaction
# a redelivery (DUP) equal to one of its device's newest readings was stored already
REDELIVERY_LOOKBACK = 20
# a result's JSON object, as the codec decodes it
ResultObject = dict[str, Any]
Content = TypeVar("Content", str, ResultObject)


@dataclass(slots=True)
class Arrival(Generic[Content]):
    """One accepted message, waiting for the database: a reading's stored JSON (str), or
    a result's object."""

    device: DeviceIdentity
    content: Content
    arrived_at: datetime
    stored: asyncio.Future[None]
    redelivery: bool  # the PUBLISH's DUP flag: it may have been stored before a crash
    names: tuple[str, ...] = ()  # a reading's field names (field_budget.py)


class Ingest:
    def __init__(self, runtime: Runtime, round_trips: RoundTrips) -> None:
        self.runtime = runtime
        self.round_trips = round_trips
        self._readings: deque[Arrival[str]] = deque()
        self._results: deque[Arrival[ResultObject]] = deque()
        self._arrived_result = asyncio.Event()  # the results' writer has something to do
        self._arrived_reading = asyncio.Event()  # the readings' writer has
        self._room = asyncio.Event()  # the queue is below its capacity
        self._room.set()
        self._idle = asyncio.Event()  # nothing queued, nothing being written
        self._idle.set()
        self._outage = Outage(
            "the device link cannot store device messages; holding them (and the devices) "
            "back until it can",
            ended="the device link stores device messages again",
        )
        # controller id -> (online, since when): the latest word on each, not yet written
        self._presence: dict[int, tuple[bool, datetime]] = {}
        self._presence_written = asyncio.Event()  # nothing of it waits to be written
        self._presence_written.set()
        # the events' newest position, announced in the background once committed
        self._announcer: events_log.Announcer | None = None
        self._field_budget = FieldBudget()

    async def room(self) -> None:
        """Return once the queue can take a message (the broker waits before a read)."""
        while self._queued() >= CAPACITY:
            self._room.clear()
            await self._room.wait()

    def _queued(self) -> int:
        return len(self._readings) + len(self._results)

    def put(
        self,
        device: DeviceIdentity,
        kind: MessageKind,
        payload: bytes,
        *,
        redelivery: bool = False,
        arrived_at: datetime | None = None,
    ) -> asyncio.Future[None]:
        """Queue a message; the future is done once it is stored, or at once if a rule of
        the readings' drops it (size, JSON: dropped and counted, and acknowledging it loses
        nothing it was owed). A reading is stored with ``arrived_at``, else now."""
        stored: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        try:
            match kind:
                case MessageKind.STATE:
                    reading, names = readings.storable_reading(payload)
                    at = arrived_at or arrival_time()
                    self._readings.append(
                        Arrival(device, reading.decode("utf-8"), at, stored, redelivery, names)
                    )
                    self._arrived_reading.set()
                case MessageKind.RESULT:
                    result = readings.parse_object(payload)
                    self._results.append(Arrival(device, result, utcnow(), stored, redelivery))
                    self._arrived_result.set()
        except RejectedPayload as rejected:
            drop(rejected.reason)
            stored.set_result(None)
            return stored
        DEVICE_INGEST_QUEUED.set(self._queued())
        self._idle.clear()
        return stored

    def presence(self, controller_id: int, *, online: bool) -> None:
        """A device connected or went away: written with the next batch, before it, never
        by the connect itself (a connect with the right secret writes nothing)."""
        self._presence[controller_id] = (online, utcnow())
        self._presence_written.clear()
        self._idle.clear()
        self._arrived_reading.set()

    async def presence_written(self) -> None:
        """Wait until every online and offline noted so far is in the database (the link
        reads or resets ``online`` after it)."""
        await self._presence_written.wait()

    async def drained(self) -> None:
        """Wait until everything queued so far is stored (the link waits when it stops)."""
        await self._idle.wait()

    async def run(self) -> None:
        """The writers, side by side: results one at a time (a ``?wait`` hangs on each),
        and presence with the readings in batches. On PostgreSQL a result never waits for
        the batch in progress; on SQLite for a batch's statements at most (the write lock)."""
        try:
            await asyncio.gather(self._write_results(), self._write_readings())
        finally:
            if self._announcer is not None:
                await self._announcer.close()

    def _announce(self, newest: int | None) -> None:
        if newest is not None:
            if self._announcer is None:
                self._announcer = events_log.Announcer(self.runtime.changes)
            self._announcer.announce(newest)

    async def _write_results(self) -> None:
        while True:
            if not self._results:
                self._arrived_result.clear()
                await self._arrived_result.wait()
                continue
            await self._attempt(partial(self._store_result, self._results[0]))

    async def _write_readings(self) -> None:
        while True:
            if not self._readings and not self._presence:
                self._arrived_reading.clear()
                await self._arrived_reading.wait()
                continue
            if len(self._readings) < GATHER_ENOUGH:
                await asyncio.sleep(GATHER_S)
            if self._presence and not await self._attempt(self._store_presence):
                continue
            if self._readings:
                await self._attempt(self._store_readings)

    async def _attempt(self, store: Callable[[], Awaitable[None]]) -> bool:
        """One transaction; on failure what it held stays queued, tried again after
        ``RETRY_S`` (False)."""
        try:
            await store()
        except Exception:
            self._outage.failed()
            DEVICE_INGEST_FAILING.set(1)
            await asyncio.sleep(RETRY_S)
            return False
        if self._outage.recovered():
            DEVICE_INGEST_FAILING.set(0)
        self._check_idle()
        return True

    def _check_idle(self) -> None:
        if not self._readings and not self._results and not self._presence:
            self._idle.set()

    async def _store_presence(self) -> None:
        written = dict(self._presence)
        async with self.runtime.database.write() as connection:
            changed = await repository.set_presence(connection, written)
            newest = await events_log.append(connection, events_log.online_changes(changed))
        self._announce(newest)
        for controller_id, state in written.items():  # unless it changed meanwhile
            if self._presence.get(controller_id) == state:
                del self._presence[controller_id]
        if not self._presence:
            self._presence_written.set()

    async def _store_readings(self) -> None:
        """The readings at the head (up to BATCH) in one transaction."""
        group = [self._readings[i] for i in range(min(BATCH, len(self._readings)))]
        async with self.runtime.database.write() as connection:
            remember_fields = await self._field_budget.apply(connection, group)
            kept = await _without_stored_redeliveries(connection, group)
            newest = None
            if kept:
                await readings_repository.insert_readings(
                    connection,
                    [ArrivedReading(a.device.controller_id, a.content, a.arrived_at) for a in kept],
                )
                newest = await events_log.append(connection, [_reading_event(a) for a in kept])
        remember_fields()
        for _ in group:  # committed: acknowledged, in arrival order
            self._acknowledge(self._readings.popleft())
        self._announce(newest)

    async def _store_result(self, head: Arrival[ResultObject]) -> None:
        outcome = await commands.record_result(
            self.runtime, head.device.controller_id, head.device.serial_number, head.content
        )
        if outcome.dropped is not None:
            drop(outcome.dropped)
        elif outcome.command is not None:
            self.round_trips.finished(outcome.command.id)
            finished = Change(COMMAND_FINISHED, head.device.controller_id, outcome.command.id)
            await self.runtime.changes.announce(finished)  # wakes ?wait and /send
        self._acknowledge(self._results.popleft())

    def _acknowledge(self, arrival: Arrival[str] | Arrival[ResultObject]) -> None:
        if not arrival.stored.done():
            arrival.stored.set_result(None)
        DEVICE_INGEST_QUEUED.set(self._queued())
        if self._queued() < CAPACITY:
            self._room.set()


def _reading_event(arrival: Arrival[str]) -> events_log.NewEvent:
    device = arrival.device
    return events_log.reading(
        device.controller_id, device.serial_number, arrival.content, arrival.arrived_at
    )


async def _without_stored_redeliveries(
    connection: Writer, group: list[Arrival[str]]
) -> list[Arrival[str]]:
    """The group less the redeliveries already stored: a DUP reading equal to one of its
    device's newest stored ones is the same message, whose PUBACK a crash lost (results
    need no such check: a finished command never changes)."""
    recent: dict[int, list[str]] = {}  # stored, and kept earlier in this group
    kept = []
    for arrival in group:
        controller_id = arrival.device.controller_id
        if arrival.redelivery and controller_id not in recent:
            recent[controller_id] = await readings_repository.recent_payloads(
                connection, controller_id, REDELIVERY_LOOKBACK
            )
        if arrival.redelivery and arrival.content in recent[controller_id]:
            continue
        if controller_id in recent:
            recent[controller_id].append(arrival.content)
        kept.append(arrival)
    return kept
