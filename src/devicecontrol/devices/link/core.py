"""The device link's core: the service's side of the devices' broker (contract §9).

The broker speaks MQTT; the link applies the rules: who is connected (``online``,
``registry.py``), what their messages become (the topic rule and the rate here, then
readings and results through ``ingest.py``), which commands they get and when
(``outbox.py``, after the subscribe filter here), and whose secret changed
(``rotation.py``). Which broker serves the devices is an adapter behind ``ports.Broker``,
chosen by the composition root (``compose.py``): the service's own device endpoint
(``endpoint/``, the default) or a client of Mosquitto (``mosquitto/``,
``DEVICECONTROL_MQTT_URL``). Either calls the faces of ``ports.py`` implemented here, so
the rules are written once. The link runs in one process, whatever the number of HTTP
workers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from datetime import datetime

from devicecontrol.devices import identity, repository, topics
from devicecontrol.devices.identity import DeviceIdentity
from devicecontrol.devices.link.absence import Absence
from devicecontrol.devices.link.device_log import DeviceEventLog
from devicecontrol.devices.link.event_upkeep import keep_events
from devicecontrol.devices.link.ingest import Ingest
from devicecontrol.devices.link.limits import MessageRate, drop
from devicecontrol.devices.link.mailbox import Mailbox
from devicecontrol.devices.link.outbox import Outbox
from devicecontrol.devices.link.ports import Broker, DeviceConnection, LinkError, Stored
from devicecontrol.devices.link.registry import Connections, log_connection
from devicecontrol.devices.link.reports import BrokerReports
from devicecontrol.devices.link.rotation import RotationWatch
from devicecontrol.devices.link.sessions import PersistentSessions, Resumed
from devicecontrol.devices.topics import MessageKind
from devicecontrol.events import log as events_log
from devicecontrol.notifications import COMMAND_MADE, Change
from devicecontrol.observability.logs import emit
from devicecontrol.observability.metrics import (
    DEVICE_CONNECTIONS_CLOSED,
    DEVICE_MESSAGES,
    DEVICES_CONNECTED,
)
from devicecontrol.runtime import Runtime

__all__ = ["DeviceConnection", "DeviceLink", "LinkError"]

FORGET_IDLE_S = 1.0  # how often what idle devices left behind (rate buckets) is dropped
# CONNECTs proved at once: PostgreSQL's read pool holds 5 connections, and a burst (every
# device after a restart) must queue here, not time out on the pool and be refused
PROVING_AT_ONCE = 4
STOP_WAIT_S = 5.0
logger = logging.getLogger("devicecontrol.devices.link")


class DeviceLink:
    """What a broker that proves devices calls (``ports.ProvingLink``); what one that
    trusts its own proof reports goes through ``reports`` (``ports.CoordinatingLink``). It
    needs a ``ports.Broker`` of them."""

    def __init__(self, runtime: Runtime, make_broker: Callable[[DeviceLink], Broker]) -> None:
        """The link with the broker ``make_broker`` builds for it (``compose.build_link``)."""
        self.runtime = runtime
        self._connections = Connections()
        self._tasks: list[asyncio.Task[None]] = []
        self._proving = asyncio.Semaphore(PROVING_AT_ONCE)
        self.rate = MessageRate(runtime.settings.device_message_rate)
        self.absence = Absence(runtime, self.rate, shard=runtime.settings.link_shard[0])
        self.mailbox = Mailbox()
        self.device_log = DeviceEventLog()
        self.reports = BrokerReports(self)  # what a broker that proves devices reports
        self.broker = make_broker(self)
        self.sessions = PersistentSessions(expiry_s=self.broker.session_expiry_s)
        self.outbox = Outbox(
            runtime,
            self.broker,
            self.mailbox,
            connections=self._connections,
            connection_of_controller=self._connections.of_controller,
        )
        self.ingest = Ingest(runtime, self.outbox.round_trips)
        self.rotations = RotationWatch(runtime, self.broker, self._connections)

    @property
    def connections(self) -> Mapping[str, DeviceConnection]:
        """The current connection of each connected device, by serial number."""
        return self._connections

    @property
    def port(self) -> int:
        """The port the embedded broker listens on (the kernel's pick for port 0)."""
        port = self.broker.port
        assert port is not None, "this link's broker does not listen here"
        return port

    # --- start and stop -------------------------------------------------------------------

    async def start(self) -> None:
        """Start the broker (``LinkError`` with a one-line reason if it cannot be); it sets
        who is online first (``reset_online`` or ``adopt_online``). An external broker's
        backlog is credited to the rate with the time this shard was away (``absence.py``)."""
        keeps_backlog = self.broker.devices_outlive_link
        if keeps_backlog:
            await self.absence.started()
        await self.broker.start()
        self.runtime.changes.add_listener(self._changed)
        await self.runtime.changes.start()
        self._tasks = [
            asyncio.create_task(self.ingest.run(), name="link: ingest"),
            asyncio.create_task(self.outbox.sweep(), name="link: command sweep"),
            asyncio.create_task(self._forget_idle(), name="link: idle state"),
        ]
        if keeps_backlog:
            heartbeat = self.absence.heartbeat(lambda: self.broker.ready)
            self._tasks.append(asyncio.create_task(heartbeat, name="link: heartbeat"))
        if self.broker.coordinates:  # the upkeep is one link's, whatever their number
            self._tasks.append(
                asyncio.create_task(keep_events(self.runtime), name="link: events upkeep")
            )
        if not self.broker.checks_secrets:
            self._tasks.append(asyncio.create_task(self.rotations.run(), name="link: secrets"))
        DEVICES_CONNECTED.set(len(self._connections))
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
            ends = [connection.wait_ended() for connection in self._connections.live]
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.gather(*ends), STOP_WAIT_S)
        await self.mailbox.drained()
        with contextlib.suppress(TimeoutError):  # what was accepted is stored, if it can be
            await asyncio.wait_for(self.ingest.drained(), STOP_WAIT_S)
        ingest.cancel()
        await asyncio.gather(ingest, return_exceptions=True)
        if not self.broker.devices_outlive_link:
            try:
                async with self.runtime.database.write() as database:
                    gone = await repository.set_everyone_offline(database)
                    newest = await events_log.append(database, events_log.online_changes(gone))
                await events_log.announce(self.runtime.changes, newest)
            except Exception:
                logger.warning("could not set the devices offline on stopping", exc_info=True)
        DEVICES_CONNECTED.set(0)
        emit(logger, logging.INFO, {"event": "device_link_stopped", **self.broker.where})

    # --- who is online when the broker starts or comes back (called by the broker) ------

    async def reset_online(self) -> None:
        """Everyone offline: the link knows of no connection (it starts, or an external
        broker's record of the time the link was away is gone)."""
        await self.mailbox.drained()
        await self.ingest.presence_written()  # no online or offline of before lands after
        self._connections.clear()
        self.sessions.clear()
        async with self.runtime.database.write() as database:
            gone = await repository.set_everyone_offline(database)
            newest = await events_log.append(database, events_log.online_changes(gone))
        await events_log.announce(self.runtime.changes, newest)
        DEVICES_CONNECTED.set(0)

    async def adopt_online(self) -> None:
        """The devices the database has online are connected and subscribed: an external
        broker kept every event of the time the link was away, and replays them next."""
        await self.mailbox.drained()
        await self.ingest.presence_written()
        async with self.runtime.database.read() as database:
            rows = await repository.online_devices(database)
        for row in rows:
            if row.serial_number not in self._connections:
                device = DeviceIdentity.of(row)
                adopted, _ = self.claim(device, "")
                adopted.subscribed = True
        DEVICES_CONNECTED.set(len(self._connections))

    def broker_ready(self) -> None:
        """The broker is (back) in reach: the outbox delivers what it could not."""
        self.outbox.broker_ready()

    def broker_lost(self) -> None:
        """The link stopped reading the broker, which keeps the devices' messages."""
        self.absence.lost()

    def broker_back(self) -> None:
        """The link reads the broker again, before the first message it kept meanwhile."""
        self.absence.back()

    # --- connections (called by the broker) ----------------------------------------------

    async def authenticate(
        self, *, client_id: str | None, username: str | None, password: str | None, address: str
    ) -> DeviceIdentity | None:
        try:
            async with self._proving:
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

    async def find_device(self, serial_number: str) -> DeviceIdentity | None:
        async with self.runtime.database.read() as database:
            row = await repository.find_device(database, serial_number)
        if row is None:
            return None
        return DeviceIdentity.of(row)

    def claim(
        self, device: DeviceIdentity, address: str
    ) -> tuple[DeviceConnection, DeviceConnection | None]:
        """A proved device's new connection becomes its current one; returns it and the
        one it takes over (which then ends without taking the device offline)."""
        return self._connections.claim(device, address)

    def begin(
        self,
        connection: DeviceConnection,
        *,
        clean: bool | None,
        kept_subscription: bool | None = None,
    ) -> Resumed:
        """A claimed connection starts: the device is online, and a persistent session it
        resumes keeps its subscription, as MQTT promises (no SUBSCRIBE comes). Which one
        it resumes is the link's record (``sessions.py``, by ``clean``), unless the broker
        says (``kept_subscription``: RabbitMQ is asked)."""
        serial_number = connection.identity.serial_number
        if kept_subscription is not None:
            resumed = Resumed(present=kept_subscription, subscribed=kept_subscription)
        else:
            resumed = self.sessions.connected(serial_number, clean=bool(clean))
        self.connection_started(connection)
        if resumed.subscribed:
            self.subscribed(serial_number, topics.commands_topic(serial_number))
        return resumed

    def connection_started(self, connection: DeviceConnection) -> None:
        DEVICES_CONNECTED.set(len(self._connections))
        log_connection("device_connected", connection)
        self.ingest.presence(connection.identity.controller_id, online=True)

    def connection_ended(self, connection: DeviceConnection) -> None:
        if not self._connections.end(connection):
            return  # taken over: the device is still online
        self.sessions.ended(connection.identity.serial_number)
        DEVICES_CONNECTED.set(len(self._connections))
        log_connection("device_disconnected", connection)
        self.ingest.presence(connection.identity.controller_id, online=False)

    def connection_refused(self, reason: str, address: str) -> None:
        DEVICE_CONNECTIONS_CLOSED.labels(reason).inc()
        self.device_log.note("device_connection_closed", reason, client_address=address)

    # --- subscriptions and messages (called by the broker) ------------------------------

    def subscribed(self, serial_number: str, topic_filter: str) -> bool:
        """The subscribe filter: a device may subscribe to its own commands topic only,
        spelled out; granted, its commands flow (``outbox.py``)."""
        granted = topics.may_subscribe(serial_number, topic_filter)
        connection = self._connections.get(serial_number)
        if granted and connection is not None:
            connection.subscribed = True
            self.sessions.subscribed(serial_number)
            self.outbox.subscribed(connection)
        return granted

    def unsubscribed(self, serial_number: str, topic_filter: str) -> bool:
        commands = topics.may_subscribe(serial_number, topic_filter)
        connection = self._connections.get(serial_number)
        if commands and connection is not None:
            connection.subscribed = False
            self.sessions.unsubscribed(serial_number)
        return commands

    def publication_kind(self, serial_number: str, topic: str) -> MessageKind | None:
        """The topic rule: a device publishes to its own ``state`` and ``commands/result``
        only; anything else is dropped and counted (``forbidden_topic``)."""
        kind = topics.publication_kind(serial_number, topic)
        if kind is None:
            drop("forbidden_topic")
        return kind

    def publication(
        self,
        serial_number: str,
        kind: MessageKind,
        payload: bytes,
        *,
        redelivery: bool = False,
        arrived_at: datetime | None = None,
    ) -> Stored | None:
        """A device's message, queued for the database behind the earlier ones: the future
        is done once it is stored (the PUBACK may go then), None when it was dropped at
        once (and counted). Past the rate it is dropped here; what the payload may be
        (size, JSON) is the readings' rule, applied as it is queued (``ingest.py``)."""
        connection = self._connections.get(serial_number)
        if connection is None:
            return None
        return self.identified_publication(
            connection.identity, kind, payload, redelivery=redelivery, arrived_at=arrived_at
        )

    def identified_publication(
        self,
        device: DeviceIdentity,
        kind: MessageKind,
        payload: bytes,
        *,
        redelivery: bool = False,
        arrived_at: datetime | None = None,
    ) -> Stored | None:
        """``publication`` of a device this link holds no connection of: a link process
        that stores a share of the devices' messages while another follows who is
        connected (the shards on RabbitMQ and Mosquitto)."""
        DEVICE_MESSAGES.labels(kind).inc()
        if not self.rate.allow(device.serial_number):
            drop("rate_limited")
            return None
        return self.ingest.put(device, kind, payload, redelivery=redelivery, arrived_at=arrived_at)

    async def room(self) -> None:
        await self.ingest.room()

    # --- housekeeping ---------------------------------------------------------------------

    def _changed(self, change: Change) -> None:
        if change.kind == COMMAND_MADE:
            self.outbox.command_made(change.controller_id)

    async def _forget_idle(self) -> None:
        """Every second: drop what idle devices and finished commands left behind."""
        while True:
            await asyncio.sleep(FORGET_IDLE_S)
            self.rate.forget_full()
            self.outbox.forget_expired()
