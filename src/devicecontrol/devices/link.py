"""The device link: the service's side of the devices' MQTT broker (contract §9).

The broker speaks MQTT; the link applies the rules: who is connected (``online``), what
their messages become (readings, results), which commands they get and when, and whose
secret changed. The broker is either the embedded one (``broker.py``, amqtt, the default)
or an external one the link is a client of (``external.py``, ``DEVICECONTROL_MQTT_URL``);
both report to the same methods here, behind the small ``LinkBroker`` face, so that the
rules are written once. The link runs in one process whatever the number of HTTP workers
(``link_process.py``). Commands are rows: a command made by any process is announced
(``notifications.py``) and delivered at once; a slow sweep of the table finds what a lost
announcement missed, and a (re)subscription delivers everything still deliverable.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Final, Literal, Protocol

from sqlalchemy import Row

from devicecontrol.clock import utcnow
from devicecontrol.devices import delivery, identity, repository, topics
from devicecontrol.devices.broker import EmbeddedBroker, LinkError
from devicecontrol.devices.device_log import DeviceEventLog
from devicecontrol.devices.external import ExternalBroker
from devicecontrol.devices.identity import DeviceIdentity
from devicecontrol.devices.inbound import DeviceWork, MessageRate, drop
from devicecontrol.devices.ingest import Ingest
from devicecontrol.devices.readings import MAX_PAYLOAD_BYTES
from devicecontrol.notifications import COMMAND_MADE, Change
from devicecontrol.observability.logs import emit
from devicecontrol.observability.metrics import DEVICE_MESSAGES, DEVICES_CONNECTED
from devicecontrol.runtime import Runtime

__all__ = ["DeviceConnection", "DeviceLink", "LinkBroker", "LinkError"]

# what a delivery sends, besides rows the sweep already read: everything deliverable (sent
# ones without a result included: a subscription), or the commands still queued (an
# announcement of a new one)
ALL_DELIVERABLE: Final = "all deliverable"
STILL_QUEUED: Final = "still queued"
Deliveries = Sequence[Row] | Literal["all deliverable", "still queued"]
WATCH_S = 1.0  # a rotated secret closes its connection this soon
STOP_WAIT_S = 5.0
logger = logging.getLogger("devicecontrol.devices.link")


def _log(event: str, connection: DeviceConnection) -> None:
    fields = {"event": event, "serial_number": connection.identity.serial_number,
              "client_address": connection.address}  # fmt: skip
    emit(logger, logging.INFO, fields)


@dataclass(eq=False)
class DeviceConnection:
    """One connection of a device, from its accepted CONNECT to its end."""

    identity: DeviceIdentity
    address: str
    handler: Any = None  # the broker's protocol handler, once the session runs
    subscribed: bool = False  # to its commands topic: deliveries may go out
    delivering: bool = False  # a delivery is waiting or running: the sweep leaves it be
    again: bool = False  # a command was made meanwhile: deliver once more after it
    ended: asyncio.Event = field(default_factory=asyncio.Event)


class LinkBroker(Protocol):
    """What the link needs of a broker: it starts, stops, carries the link's commands to
    devices and ends a connection; it reports connections, subscriptions and publications
    to the link's methods below. No rule of contract §9 lives behind this face."""

    # what the logs name: {"listen": HOST:PORT} or {"broker": URL without the password}
    where: dict[str, str]
    # the devices stay connected to the broker when the link stops (an external broker):
    # stopping neither waits for their connections to end nor sets them offline
    devices_outlive_link: bool
    # the broker itself ends a connection whose secret was rotated (Mosquitto's dynamic
    # security does): the link does not look for them
    checks_secrets: bool

    @property
    def ready(self) -> bool:
        """Commands can be published now (an external broker may be out of reach)."""

    async def start(self) -> None: ...

    async def shutdown(self) -> None: ...

    async def publish(self, topic: str, payload: bytes) -> None: ...

    async def close_connection(self, connection: DeviceConnection) -> None: ...


class DeviceLink:
    def __init__(self, runtime: Runtime, *, listen: str | None = None) -> None:
        """The embedded broker on ``listen`` (else the setting), or, when the settings name
        ``DEVICECONTROL_MQTT_URL`` and no ``listen`` is given, a client of that broker."""
        settings = runtime.settings
        self.runtime = runtime
        self.connections: dict[str, DeviceConnection] = {}  # the current one per serial
        self.rate = MessageRate(settings.device_message_rate)
        self.work = DeviceWork()
        self.round_trips = delivery.RoundTrips()
        self.device_log = DeviceEventLog()
        self.ingest = Ingest(runtime, self.round_trips)
        self.broker: LinkBroker
        if settings.mqtt_url is not None and listen is None:
            self.broker = ExternalBroker(self, settings.mqtt_url, ca_file=settings.mqtt_ca)
        else:
            self.broker = EmbeddedBroker(self, listen or settings.mqtt_listen)
        self._live: set[DeviceConnection] = set()  # not ended yet, taken-over ones included
        self._tasks: list[asyncio.Task[None]] = []
        self._failing: set[str] = set()  # periodic tasks failing now (logged once)
        self._undelivered: set[str] = set()  # serials whose delivery failed half-way
        self._started_delivering = False  # broker_ready has run once

    @property
    def port(self) -> int:
        """The port the embedded broker listens on (the kernel's pick for port 0)."""
        assert isinstance(self.broker, EmbeddedBroker), "an external broker has no port here"
        return self.broker.port

    async def start(self) -> None:
        """Start the broker (``LinkError`` with a one-line reason if it cannot be); it sets
        who is online first (``reset_online`` or ``adopt_online``)."""
        await self.broker.start()
        self.runtime.changes.add_listener(self._changed)
        await self.runtime.changes.start()
        self._tasks = [
            asyncio.create_task(self.ingest.run(), name="link: ingest"),
            asyncio.create_task(self._deliver_new_commands(), name="link: new commands"),
            asyncio.create_task(self._watch(), name="link: secrets"),
        ]
        DEVICES_CONNECTED.set(len(self.connections))
        emit(logger, logging.INFO, {"event": "device_link_started", **self.broker.where})

    async def stop(self) -> None:
        """Stop the broker and store what was accepted. The embedded broker's devices are
        disconnected cleanly and set offline; an external broker's stay connected to it,
        and online."""
        self.runtime.changes.remove_listener(self._changed)
        ingest, *others = self._tasks
        for task in others:
            task.cancel()
        await asyncio.gather(*others, return_exceptions=True)
        await self.broker.shutdown()
        if not self.broker.devices_outlive_link:
            ends = [connection.ended.wait() for connection in self._live]
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.gather(*ends), STOP_WAIT_S)
        await self.work.drained()
        with contextlib.suppress(TimeoutError):  # what was accepted is stored, if it can be
            await asyncio.wait_for(self.ingest.drained(), STOP_WAIT_S)
        ingest.cancel()
        await asyncio.gather(ingest, return_exceptions=True)
        if not self.broker.devices_outlive_link:
            try:
                async with self.runtime.database.write() as connection:
                    await repository.set_everyone_offline(connection)
            except Exception:
                logger.warning("could not set the devices offline on stopping", exc_info=True)
        DEVICES_CONNECTED.set(0)
        emit(logger, logging.INFO, {"event": "device_link_stopped", **self.broker.where})

    # --- who is online when the broker starts or comes back (called by the broker) ------

    async def reset_online(self) -> None:
        """Everyone offline: the link knows of no connection (it starts, or an external
        broker's record of the time the link was away is gone)."""
        await self.work.drained()
        await self.ingest.presence_written()  # no online or offline of before lands after
        for connection in self.connections.values():
            connection.ended.set()
            self._live.discard(connection)
        self.connections.clear()
        async with self.runtime.database.write() as connection:
            await repository.set_everyone_offline(connection)
        DEVICES_CONNECTED.set(0)

    async def adopt_online(self) -> None:
        """The devices the database has online are connected and subscribed: an external
        broker kept every event of the time the link was away, and replays them next."""
        await self.work.drained()
        await self.ingest.presence_written()
        async with self.runtime.database.read() as connection:
            rows = await repository.online_devices(connection)
        for row in rows:
            if row.serial_number not in self.connections:
                device = DeviceIdentity(
                    row.id, row.serial_number, row.type, row.device_secret_digest or ""
                )
                adopted, _ = self.claim(device, "")
                adopted.subscribed = True
        DEVICES_CONNECTED.set(len(self.connections))

    def broker_ready(self) -> None:
        """The broker is (back) in reach: deliveries that failed on the way out are made
        again. The first time after the link started, every subscribed device gets what is
        deliverable: a command a previous link marked ``sent`` may never have gone out, and
        devices that stayed connected to an external broker will not subscribe again."""
        first, self._started_delivering = not self._started_delivering, True
        serials = sorted(self.connections) if first else sorted(self._undelivered)
        for serial_number in serials:
            connection = self.connections.get(serial_number)
            if connection is not None and connection.delivering:
                connection.again = True
            elif connection is not None and connection.subscribed:
                self._deliver(connection, ALL_DELIVERABLE)
        self._undelivered.clear()

    # --- connections (called by the broker) ----------------------------------------------

    async def authenticate(
        self, *, client_id: str | None, username: str | None, password: str | None, address: str
    ) -> DeviceIdentity | None:
        try:
            return await identity.authenticate_device(
                self.runtime,
                client_id=client_id,
                username=username,
                password=password,
                address=address,
            )
        except Exception:  # the database is down: refused, like a wrong secret
            logger.warning("device authentication failed", exc_info=True)
            return None

    def claim(
        self, device: DeviceIdentity, address: str
    ) -> tuple[DeviceConnection, DeviceConnection | None]:
        """A proved device's new connection becomes its current one; returns it and the
        one it takes over (which then ends without taking the device offline)."""
        connection = DeviceConnection(device, address)
        previous = self.connections.get(device.serial_number)
        self.connections[device.serial_number] = connection
        self._live.add(connection)
        return connection, previous

    def connection_started(self, connection: DeviceConnection) -> None:
        device = connection.identity
        DEVICES_CONNECTED.set(len(self.connections))
        _log("device_connected", connection)
        self.ingest.presence(device.controller_id, online=True)

    def connection_ended(self, connection: DeviceConnection) -> None:
        connection.ended.set()
        self._live.discard(connection)
        device = connection.identity
        if self.connections.get(device.serial_number) is not connection:
            return  # taken over: the device is still online
        del self.connections[device.serial_number]
        DEVICES_CONNECTED.set(len(self.connections))
        _log("device_disconnected", connection)
        self.ingest.presence(device.controller_id, online=False)

    # --- subscriptions and messages (called by the broker's plugins) ---------------------

    def subscribed(self, serial_number: str, topic: str) -> None:
        connection = self.connections.get(serial_number)
        if connection is not None and topics.may_subscribe(serial_number, topic):
            connection.subscribed = True
            self._deliver(connection, ALL_DELIVERABLE)

    def unsubscribed(self, serial_number: str, topic: str) -> None:
        connection = self.connections.get(serial_number)
        if connection is not None and topics.may_subscribe(serial_number, topic):
            connection.subscribed = False

    def publication_refused(self, serial_number: str) -> None:
        drop("forbidden_topic")

    def publication(
        self, serial_number: str, topic: str, payload: bytes, *, redelivery: bool = False
    ) -> asyncio.Future[None] | None:
        """A device's message on one of its topics, queued for the database behind the
        earlier ones: the future is done once it is stored (the PUBACK may go then), None
        when it was dropped at once (and counted)."""
        connection = self.connections.get(serial_number)
        kind = topics.publication_kind(serial_number, topic)
        if connection is None:
            return None
        if kind is None:
            drop("forbidden_topic")
            return None
        DEVICE_MESSAGES.labels(kind).inc()
        if not self.rate.allow(serial_number):
            drop("rate_limited")
            return None
        if len(payload) > MAX_PAYLOAD_BYTES:  # not even queued
            drop("too_large")
            return None
        return self.ingest.put(connection.identity, kind, payload, redelivery=redelivery)

    # --- deliveries ---------------------------------------------------------------------

    def _changed(self, change: Change) -> None:
        """A command was made (by any process): deliver it now to its connected device."""
        if change.kind != COMMAND_MADE or not self.broker.ready:
            return
        for connection in self.connections.values():
            if connection.identity.controller_id == change.controller_id:
                if connection.delivering:
                    connection.again = True
                elif connection.subscribed:
                    self._deliver(connection, STILL_QUEUED)
                return

    def _deliver(self, connection: DeviceConnection, queued: Deliveries) -> None:
        """Queue a delivery of ``queued`` (rows, or which ones to read then)."""
        connection.delivering = True
        connection.again = False
        job = partial(self._delivery, connection, queued)
        self.work.put(connection.identity.serial_number, job)

    async def _delivery(self, connection: DeviceConnection, queued: Deliveries) -> None:
        try:
            if connection.ended.is_set() or not connection.subscribed:
                return
            device = connection.identity
            if queued == ALL_DELIVERABLE:
                rows: Sequence[Row] = await delivery.deliverable(self.runtime, device)
            elif queued == STILL_QUEUED:
                rows = await delivery.still_queued(self.runtime, device)
            else:
                rows = queued
            await delivery.deliver(
                self.runtime, device, rows, publish=self._publish, round_trips=self.round_trips
            )
        except Exception:
            # a command marked sent may not have gone out (an external broker out of reach):
            # everything deliverable goes again once the broker is back (at least once)
            self._undelivered.add(connection.identity.serial_number)
            raise
        finally:
            connection.delivering = False
            if connection.again and connection.subscribed and not connection.ended.is_set():
                self._deliver(connection, STILL_QUEUED)  # what was made while this one ran

    async def _publish(self, topic: str, payload: bytes) -> None:
        """To the one session allowed to subscribe to ``topic``: its device's."""
        await self.broker.publish(topic, payload)

    async def _deliver_new_commands(self) -> None:
        """The safety sweep: commands an announcement lost, found in the table every
        ``DEVICECONTROL_COMMAND_SWEEP`` seconds (they are pushed: ``_changed``)."""
        while True:
            await asyncio.sleep(self.runtime.settings.command_sweep_s)
            waiting = {
                c.identity.controller_id: c
                for c in self.connections.values()
                if c.subscribed and not c.delivering
            }
            if not waiting or not self.broker.ready:
                continue
            try:
                async with self.runtime.database.read() as connection:
                    rows = await repository.queued_commands_of(connection, list(waiting), utcnow())
            except Exception:
                self._failed("read new commands")
                continue
            self._failing.discard("read new commands")
            by_device: dict[int, list[Row]] = {}
            for row in rows:
                by_device.setdefault(row.controller_id, []).append(row)
            for controller_id, queued in by_device.items():
                self._deliver(waiting[controller_id], queued)

    def _failed(self, what: str) -> None:
        """Log a failing periodic task once per outage, not every time it runs."""
        if what not in self._failing:
            logger.warning("the device link cannot %s", what, exc_info=True)
        self._failing.add(what)

    # --- housekeeping ---------------------------------------------------------------------

    async def _watch(self) -> None:
        """Every second: close connections whose secret was rotated; forget idle state."""
        while True:
            await asyncio.sleep(WATCH_S)
            self.rate.forget_full()
            self.round_trips.forget_expired()
            if self.broker.checks_secrets:
                continue
            try:
                await self._close_rotated()
                self._failing.discard("check device secrets")
            except Exception:
                self._failed("check device secrets")

    async def _close_rotated(self) -> None:
        live = list(self.connections.values())
        if not live:
            return
        async with self.runtime.database.read() as connection:
            digests = await repository.secret_digests(
                connection, [c.identity.serial_number for c in live]
            )
        for connection in live:
            device = connection.identity
            if digests.get(device.serial_number) != device.secret_digest:
                _log("device_secret_changed", connection)
                await self.broker.close_connection(connection)
