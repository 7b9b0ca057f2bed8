"""Commands to connected devices (contract §9, Commands): every rule of delivery, here.

- **In order, one delivery at a time per device.** A delivery is a job in the device's
  mailbox; while one waits or runs, a command made meanwhile is noted (``_again``) and
  delivered once it is done, never beside it.
- **Sent first, published after.** A command is marked ``sent`` only if still queued and
  unexpired (one conditional UPDATE), then published: one that expired or finished
  meanwhile never goes out.
- **At least once.** A subscription gets everything deliverable: queued, and ``sent``
  without a result (published to a connection that vanished). A delivery that fails half
  way (the broker out of reach) goes again, whole, once the broker is back; the first
  ``broker_ready`` after a start delivers to every subscribed device, for the commands a
  previous link left ``sent`` whose publish may never have gone out.
- **Pushed, with a sweep behind.** A command made by any process is announced
  (``notifications.py``) and delivered at once; every ``DEVICECONTROL_COMMAND_SWEEP``
  seconds the table is read for what a lost announcement missed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from enum import Enum
from functools import partial
from typing import Any

from sqlalchemy import Row

from devicecontrol.clock import monotonic, utcnow
from devicecontrol.devices import topics
from devicecontrol.devices.commands import repository
from devicecontrol.devices.commands import service as commands
from devicecontrol.devices.identity import DeviceIdentity
from devicecontrol.devices.link.mailbox import Mailbox
from devicecontrol.devices.link.outage import Outage
from devicecontrol.devices.link.ports import Broker, DeviceConnection, NotSubscribed
from devicecontrol.observability.metrics import COMMAND_ROUND_TRIP
from devicecontrol.runtime import Runtime


class ToRead(Enum):
    """Which commands a delivery reads when it runs: everything deliverable (``sent`` ones
    without a result included: a subscription), or those still queued (a new one)."""

    ALL_DELIVERABLE = "all deliverable"
    STILL_QUEUED = "still queued"


# what a delivery sends: rows the sweep already read, or which ones to read then
Deliveries = Sequence[Row[Any]] | ToRead
logger = logging.getLogger("devicecontrol.devices.link")


class RoundTrips:
    """When this link first published each unfinished command, for the round-trip time.

    A command is forgotten at its result or once it has expired, so the memory held is
    that of the commands in flight.
    """

    def __init__(self) -> None:
        self._published: dict[int, tuple[float, float]] = {}  # id -> (at, forget after)

    def published(self, command: Row[Any]) -> None:
        if command.id not in self._published:
            now = monotonic()
            ttl_s = (command.expires_at - utcnow()).total_seconds()
            self._published[command.id] = (now, now + max(ttl_s, 0.0) + 1.0)

    def finished(self, command_id: int) -> None:
        published = self._published.pop(command_id, None)
        if published is not None:
            COMMAND_ROUND_TRIP.observe(monotonic() - published[0])

    def forget_expired(self) -> None:
        now = monotonic()
        for command_id in [k for k, (_, until) in self._published.items() if until < now]:
            del self._published[command_id]


class Outbox:
    def __init__(
        self,
        runtime: Runtime,
        broker: Broker,
        mailbox: Mailbox,
        *,
        connections: Mapping[str, DeviceConnection],
        connection_of_controller: Callable[[int], DeviceConnection | None],
    ) -> None:
        self.runtime = runtime
        self.broker = broker
        self.mailbox = mailbox
        self.round_trips = RoundTrips()
        self._connections = connections
        self._connection_of_controller = connection_of_controller
        self._reading = Outage("the device link cannot read new commands")
        self._delivering: set[DeviceConnection] = set()  # a delivery waits or runs
        self._again: set[DeviceConnection] = set()  # a command was made meanwhile
        self._undelivered: set[str] = set()  # serials whose delivery failed half-way
        self._started = False  # broker_ready has run once

    def subscribed(self, connection: DeviceConnection) -> None:
        """A device (re)subscribed to its commands: everything deliverable goes."""
        self._deliver(connection, ToRead.ALL_DELIVERABLE)

    def command_made(self, controller_id: int) -> None:
        """A command was made (by any process): deliver it now to its connected device."""
        if not self.broker.ready:
            return
        connection = self._connection_of_controller(controller_id)
        if connection is None:
            return
        if connection in self._delivering:
            self._again.add(connection)
        elif connection.subscribed:
            self._deliver(connection, ToRead.STILL_QUEUED)

    def broker_ready(self) -> None:
        """The broker is (back) in reach: deliveries that failed on the way out are made
        again; the first time after a start, every subscribed device's (module docstring)."""
        first, self._started = not self._started, True
        serials = sorted(self._connections) if first else sorted(self._undelivered)
        for serial_number in serials:
            connection = self._connections.get(serial_number)
            if connection is not None and connection in self._delivering:
                self._again.add(connection)
            elif connection is not None and connection.subscribed:
                self._deliver(connection, ToRead.ALL_DELIVERABLE)
        self._undelivered.clear()

    def forget_expired(self) -> None:
        """Forget the round trips of commands that expired without a result."""
        self.round_trips.forget_expired()

    async def sweep(self) -> None:
        """The safety sweep: commands an announcement lost, found in the table every
        ``DEVICECONTROL_COMMAND_SWEEP`` seconds."""
        while True:
            await asyncio.sleep(self.runtime.settings.command_sweep_s)
            waiting = {
                c.identity.controller_id: c
                for c in self._connections.values()
                if c.subscribed and c not in self._delivering
            }
            if not waiting or not self.broker.ready:
                continue
            try:
                async with self.runtime.database.read() as connection:
                    rows = await repository.queued_commands_of(connection, list(waiting), utcnow())
            except Exception:
                self._reading.failed()
                continue
            self._reading.recovered()
            by_device: dict[int, list[Row[Any]]] = {}
            for row in rows:
                by_device.setdefault(row.controller_id, []).append(row)
            for controller_id, queued in by_device.items():
                self._deliver(waiting[controller_id], queued)

    def _deliver(self, connection: DeviceConnection, queued: Deliveries) -> None:
        """Queue a delivery of ``queued`` (rows, or which ones to read then)."""
        self._delivering.add(connection)
        self._again.discard(connection)
        job = partial(self._delivery, connection, queued)
        self.mailbox.put(connection.identity.serial_number, job)

    async def _delivery(self, connection: DeviceConnection, queued: Deliveries) -> None:
        try:
            if connection.is_ended or not connection.subscribed:
                return
            device = connection.identity
            match queued:
                case ToRead.ALL_DELIVERABLE:
                    rows: Sequence[Row[Any]] = await _deliverable(self.runtime, device)
                case ToRead.STILL_QUEUED:
                    rows = await _still_queued(self.runtime, device)
                case _:
                    rows = queued
            await self._publish_in_order(device, rows)
        except NotSubscribed:
            # the broker routed it nowhere (a connection whose kept subscription was gone):
            # the command stays sent and goes again, with the rest, at the next subscription
            connection.subscribed = False
        except Exception:
            # a command marked sent may not have gone out (an external broker out of reach):
            # everything deliverable goes again once the broker is back (at least once)
            self._undelivered.add(connection.identity.serial_number)
            raise
        finally:
            self._delivering.discard(connection)
            again = connection in self._again
            self._again.discard(connection)
            if again and connection.subscribed and not connection.is_ended:
                self._deliver(connection, ToRead.STILL_QUEUED)  # what was made while this one ran

    async def _publish_in_order(self, device: DeviceIdentity, rows: Sequence[Row[Any]]) -> None:
        """Each command (in creation order) that may still be sent: marked, then published."""
        topic = topics.commands_topic(device.serial_number)
        for command in rows:
            if await commands.mark_sent(self.runtime, device.serial_number, command):
                await self.broker.publish(topic, commands.delivery_payload(command))
                self.round_trips.published(command)


async def _deliverable(runtime: Runtime, device: DeviceIdentity) -> list[Row[Any]]:
    """What a device that has just subscribed gets: queued, or sent without a result."""
    async with runtime.database.read() as connection:
        return list(
            await repository.deliverable_commands(connection, device.controller_id, utcnow())
        )


async def _still_queued(runtime: Runtime, device: DeviceIdentity) -> list[Row[Any]]:
    """What a subscribed device has not been sent yet (a command was just made)."""
    async with runtime.database.read() as connection:
        return list(
            await repository.queued_commands_of(connection, [device.controller_id], utcnow())
        )
