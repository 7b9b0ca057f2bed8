"""The device link: the embedded MQTT broker and the service's side of it (contract §9).

The broker (``broker.py``, amqtt) speaks MQTT; the link applies the rules: who is connected
(``online``), what their messages become (readings, results), which commands they get and
when, and whose secret changed. It runs in one process whatever the number of HTTP
workers (``link_process.py``). Commands are rows: the link polls the table for those of
its connected devices, so a command made by any process, before or after a restart,
reaches its device.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from sqlalchemy import Row

from devicecontrol.clock import utcnow
from devicecontrol.devices import delivery, identity, repository, topics
from devicecontrol.devices.broker import DeviceBroker, LinkError, listening_socket, tls_context
from devicecontrol.devices.identity import DeviceIdentity
from devicecontrol.devices.inbound import DeviceWork, MessageRate, drop
from devicecontrol.devices.readings import MAX_PAYLOAD_BYTES
from devicecontrol.observability.logs import emit
from devicecontrol.observability.metrics import DEVICE_MESSAGES, DEVICES_CONNECTED
from devicecontrol.runtime import Runtime

__all__ = ["DeviceConnection", "DeviceLink", "LinkError"]

POLL_S = 0.1  # new commands reach a connected device this soon
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
    delivering: bool = False  # a delivery is waiting or running: the poll leaves it be
    ended: asyncio.Event = field(default_factory=asyncio.Event)


class DeviceLink:
    def __init__(self, runtime: Runtime, *, listen: str | None = None) -> None:
        settings = runtime.settings
        self.runtime = runtime
        self.listen = listen or settings.mqtt_listen
        self.connections: dict[str, DeviceConnection] = {}  # the current one per serial
        self.rate = MessageRate(settings.device_message_rate)
        self.work = DeviceWork(max_messages=settings.device_message_rate.limit)
        self.round_trips = delivery.RoundTrips()
        self.broker: DeviceBroker | None = None
        self._live: set[DeviceConnection] = set()  # not ended yet, taken-over ones included
        self._tasks: list[asyncio.Task[None]] = []
        self._failing: set[str] = set()  # periodic tasks failing now (logged once)
        self._port: int | None = None

    @property
    def port(self) -> int:
        """The port it listens on (the kernel's pick when ``listen`` names port 0)."""
        assert self._port is not None, "the link is not started"
        return self._port

    async def start(self) -> None:
        """Listen for devices (``LinkError`` if that cannot be), everyone offline first."""
        settings = self.runtime.settings
        listener = listening_socket(self.listen)
        self._port = int(listener.getsockname()[1])
        try:
            context = None
            if settings.mqtt_tls_cert and settings.mqtt_tls_key:
                context = tls_context(settings.mqtt_tls_cert, settings.mqtt_tls_key)
            async with self.runtime.database.write() as connection:
                await repository.set_everyone_offline(connection)
            self.broker = DeviceBroker(self, listener, context)
            await self.broker.start()
        except BaseException:
            listener.close()
            raise
        self._tasks = [
            asyncio.create_task(self._deliver_new_commands(), name="link: new commands"),
            asyncio.create_task(self._watch(), name="link: secrets"),
        ]
        DEVICES_CONNECTED.set(0)
        emit(logger, logging.INFO, {"event": "device_link_started", "listen": self.listen})

    async def stop(self) -> None:
        """Close every device connection cleanly, store what was accepted, all offline."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self.broker is not None:
            await self.broker.shutdown()
        ends = [connection.ended.wait() for connection in self._live]
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.gather(*ends), STOP_WAIT_S)
        await self.work.drained()
        try:
            async with self.runtime.database.write() as connection:
                await repository.set_everyone_offline(connection)
        except Exception:
            logger.warning("could not set the devices offline on stopping", exc_info=True)
        DEVICES_CONNECTED.set(0)
        emit(logger, logging.INFO, {"event": "device_link_stopped", "listen": self.listen})

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
        self.work.put(device.serial_number, partial(self._set_online, device.controller_id))

    def connection_ended(self, connection: DeviceConnection) -> None:
        connection.ended.set()
        self._live.discard(connection)
        device = connection.identity
        if self.connections.get(device.serial_number) is not connection:
            return  # taken over: the device is still online
        del self.connections[device.serial_number]
        DEVICES_CONNECTED.set(len(self.connections))
        _log("device_disconnected", connection)
        self.work.put(device.serial_number, partial(self._set_offline, device.controller_id))

    async def _set_online(self, controller_id: int) -> None:
        async with self.runtime.database.write() as connection:
            await repository.set_online(connection, controller_id, online=True, now=utcnow())

    async def _set_offline(self, controller_id: int) -> None:
        async with self.runtime.database.write() as connection:
            await repository.set_offline(connection, controller_id)

    # --- subscriptions and messages (called by the broker's plugins) ---------------------

    def subscribed(self, serial_number: str, topic: str) -> None:
        connection = self.connections.get(serial_number)
        if connection is not None and topics.may_subscribe(serial_number, topic):
            connection.subscribed = True
            self._deliver(connection, None)

    def unsubscribed(self, serial_number: str, topic: str) -> None:
        connection = self.connections.get(serial_number)
        if connection is not None and topics.may_subscribe(serial_number, topic):
            connection.subscribed = False

    def publication_refused(self, serial_number: str) -> None:
        drop("forbidden_topic")

    def publication(self, serial_number: str, topic: str, payload: bytes) -> None:
        """A device's message on one of its topics: queued behind its earlier ones."""
        connection = self.connections.get(serial_number)
        kind = topics.publication_kind(serial_number, topic)
        if connection is None or kind is None:
            return
        DEVICE_MESSAGES.labels(kind).inc()
        if not self.rate.allow(serial_number):
            drop("rate_limited")
            return
        if len(payload) > MAX_PAYLOAD_BYTES:  # not even queued
            drop("too_large")
            return
        device = connection.identity
        if kind == topics.STATE:
            job = partial(delivery.take_state, self.runtime, device, payload)
        else:
            job = partial(delivery.take_result, self.runtime, device, payload, self.round_trips)
        if not self.work.put_message(serial_number, job):
            drop("rate_limited")

    # --- deliveries ---------------------------------------------------------------------

    def _deliver(self, connection: DeviceConnection, queued: list[Row] | None) -> None:
        """Queue a delivery: of ``queued``, or (None) of everything deliverable."""
        connection.delivering = True
        job = partial(self._delivery, connection, queued)
        self.work.put(connection.identity.serial_number, job)

    async def _delivery(self, connection: DeviceConnection, queued: list[Row] | None) -> None:
        try:
            if connection.ended.is_set() or not connection.subscribed:
                return
            device = connection.identity
            rows = queued
            if rows is None:
                rows = await delivery.deliverable(self.runtime, device)
            await delivery.deliver(
                self.runtime, device, rows, publish=self._publish, round_trips=self.round_trips
            )
        finally:
            connection.delivering = False

    async def _publish(self, topic: str, payload: bytes) -> None:
        """To the one session allowed to subscribe to ``topic``: its device's."""
        assert self.broker is not None
        await self.broker.internal_message_broadcast(topic, payload, qos=1)

    async def _deliver_new_commands(self) -> None:
        """Commands made since (by any process): the table, polled for subscribed devices."""
        while True:
            await asyncio.sleep(POLL_S)
            waiting = {
                c.identity.controller_id: c
                for c in self.connections.values()
                if c.subscribed and not c.delivering
            }
            if not waiting:
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
            try:
                await self._close_rotated()
                self._failing.discard("check device secrets")
            except Exception:
                self._failed("check device secrets")

    async def _close_rotated(self) -> None:
        live = list(self.connections.values())
        if not live or self.broker is None:
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
