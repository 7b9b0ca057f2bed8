"""The device link as a client of RabbitMQ (``DEVICECONTROL_AMQP_URL``); a ``ports.Broker``.

Devices speak MQTT 3.1.1 to RabbitMQ's MQTT plugin, which asks the broker hook who they
are and which topics they may use (``devices/hook/``). The link reads and publishes over
AMQP, with names as ``devices/amqp_names.py`` gives them:

- the devices' messages come from one durable queue, ``devicecontrol.devices``, bound to
  ``amq.topic`` for every device's ``state`` and ``commands/result``; it has a single
  active consumer, so a second link process on it is a hot standby that takes over when the
  first goes, and one device's messages stay in order. Each delivery is acknowledged once
  it is stored (``acks.py``): a link that dies before leaves it with the broker, which
  delivers it again;
- who connects, leaves and subscribes comes from the event exchange plugin, through a
  second durable queue, ``devicecontrol.events`` (``connection.created`` names the user, a
  device's serial, and the connection's name; ``connection.closed`` only the name, so the
  link keeps name -> serial; ``binding.created`` of a device's subscription queue is its
  subscription to its commands). Both queues keep what happens while no link runs. They
  are reported to the link in its broker-neutral terms (``reports.py``); a resumed
  persistent session makes no ``binding.created``, so at each connect RabbitMQ is asked
  whether the device's subscription queue is there (a passive declare);
- a command is published to ``amq.topic`` with its routing key, persistent, confirmed and
  mandatory, for the plugin to deliver to the device's subscription queue (which keeps it
  while the device is away, for a session that is not clean); one no queue takes comes
  back (``ports.NotSubscribed``).

A device whose secret was rotated is refused at its next login by the hook; the
connection it made with the old secret is ended through RabbitMQ's management API
(``management.py``, ``DEVICECONTROL_RABBITMQ_MANAGEMENT_URL``), by the name its
``connection.created`` event gave. Without that API it stays until it ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aio_pika
from aio_pika.abc import (
    AbstractChannel,
    AbstractExchange,
    AbstractIncomingMessage,
    AbstractQueue,
    AbstractRobustConnection,
)
from aio_pika.exceptions import ChannelNotFoundEntity, PublishError
from pamqp.common import FieldTable

from devicecontrol.config import MqttUrl
from devicecontrol.controllers.identity import is_serial_number
from devicecontrol.devices import amqp_names, topics
from devicecontrol.devices.link.acks import InOrderAcknowledgements, Turn, take_in_order
from devicecontrol.devices.link.outage import Outage
from devicecontrol.devices.link.ports import (
    CoordinatingLink,
    DeviceConnection,
    LinkError,
    NotSubscribed,
    Stored,
)
from devicecontrol.devices.link.rabbitmq.management import ManagementApi

__all__ = ["RabbitMQBroker", "declare_shards", "shard_queue"]

SHARDS = amqp_names.LINK_QUEUE_PREFIX + "devices"  # the consistent-hash exchange
EVENTS_QUEUE = amqp_names.LINK_QUEUE_PREFIX + "events"
HASH_EXCHANGE = "x-consistent-hash"  # rabbitmq_consistent_hash_exchange
EQUAL_WEIGHT = "1"  # a shard queue's binding key on the hash exchange: its weight
DEVICE_KEYS = tuple(
    amqp_names.routing_key(topic) for topic in topics.DEVICE_PUBLICATIONS
)  # devices.*.state, devices.*.commands.result
EVENT_KEYS = ("connection.created", "connection.closed", "binding.created", "binding.deleted")
ONE_CONSUMER: FieldTable = {"x-single-active-consumer": True}
# what one of the link's queues' deliveries is handed to: a device's message or an event
Handler = Callable[[AbstractIncomingMessage], Awaitable[Stored | None]]
Delivery = Turn[AbstractIncomingMessage]  # a delivery, with its place among the acks
PREFETCH = 1000  # deliveries not yet acknowledged: the flow control
CONNECT_TIMEOUT_S = 10
logger = logging.getLogger("devicecontrol.devices.link")


def shard_queue(number: int) -> str:
    """The queue of shard ``number`` of the devices' messages."""
    return f"{SHARDS}.{number}"


async def declare_shards(channel: AbstractChannel, count: int) -> None:
    """The devices' messages from ``amq.topic`` into ``count`` shard queues, by a hash of
    their routing key (so each device's ``state`` stays in one queue, in order); every
    shard's queue is declared, so that each keeps its share until its link reads it."""
    topic = await channel.get_exchange(amqp_names.EXCHANGE, ensure=False)
    hashing = await channel.declare_exchange(SHARDS, HASH_EXCHANGE, durable=True)
    for key in DEVICE_KEYS:
        await hashing.bind(topic, key)
    for number in range(count):
        queue = await channel.declare_queue(
            shard_queue(number), durable=True, arguments=ONE_CONSUMER
        )
        await queue.bind(hashing, EQUAL_WEIGHT)


def _address(connection_name: str) -> str:
    """The client's address in RabbitMQ's name of a connection ("client -> listener")."""
    return connection_name.partition(" -> ")[0]


def _text(value: Any) -> str:
    """A header's value as text (the event plugin sends binary strings)."""
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", "replace")
    return "" if value is None else str(value)


class RabbitMQBroker:
    """The link's ``ports.Broker`` on RabbitMQ (the module's docstring)."""

    devices_outlive_link = True
    checks_secrets = False
    reports_every_connection = True  # the events queue is durable: nothing is missed
    # RabbitMQ keeps persistent sessions, and is asked of them
    session_expiry_s: float | None = None

    def __init__(
        self,
        link: CoordinatingLink,
        url: MqttUrl,
        *,
        ca_file: str | None,
        shard: tuple[int, int] = (0, 1),
        management: ManagementApi | None = None,
    ) -> None:
        self.link = link
        self.shard = shard
        self.coordinates = shard[0] == 0
        self.url = url
        self.where = {"broker": str(url)}
        self._ca_file = ca_file
        self._connection: AbstractRobustConnection | None = None
        self._exchange: AbstractExchange | None = None
        self._readers: list[asyncio.Task[None]] = []
        self._by_name: dict[str, str] = {}  # a device's connection name -> its serial
        self._management = management
        self._acking: set[asyncio.Task[None]] = set()
        self._ready = False
        self._away = False  # the connection dropped; the next delivery is from a backlog
        self._failing = Outage("the device link failed on a RabbitMQ delivery")

    @property
    def ready(self) -> bool:
        return self._ready and self._connection is not None and not self._connection.is_closed

    @property
    def port(self) -> None:
        """Devices connect to the broker, not to this process."""
        return None

    async def start(self) -> None:
        """Connect, declare the link's queues, and read them; ``LinkError`` (one line) if
        RabbitMQ cannot be reached or refuses the service's user."""
        url = self.url
        scheme = "amqps" if url.tls else "amqp"
        context = ssl.create_default_context(cafile=self._ca_file) if url.tls else None
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT_S):
                self._connection = await aio_pika.connect_robust(
                    host=url.host,
                    port=url.port,
                    login=url.username,
                    password=url.password,
                    ssl=url.tls,
                    ssl_context=context,
                    client_properties={"connection_name": "devicecontrol-link"},
                )
        except Exception as exc:  # aiormq's and the socket's many kinds
            reason = " ".join(str(exc).split()) or type(exc).__name__
            raise LinkError(
                f"the RabbitMQ broker at {scheme}://{url.username}@{url.host}:{url.port} "
                f"(DEVICECONTROL_AMQP_URL) cannot be reached: {reason}"
            ) from None
        self._connection.close_callbacks.add(self._lost)
        channel = await self._connection.channel(publisher_confirms=True, on_return_raises=True)
        await channel.set_qos(prefetch_count=PREFETCH)
        self._exchange = await channel.get_exchange(amqp_names.EXCHANGE, ensure=False)
        index, count = self.shard
        await declare_shards(channel, count)
        mine = await channel.get_queue(shard_queue(index), ensure=False)
        self._readers = [
            asyncio.create_task(self._read(mine, self._message), name="link: device messages")
        ]
        if self.coordinates:  # who is connected, and so the deliveries, are shard 0's
            events_exchange = await channel.get_exchange(amqp_names.EVENTS, ensure=False)
            events = await channel.declare_queue(EVENTS_QUEUE, durable=True, arguments=ONE_CONSUMER)
            for key in EVENT_KEYS:
                await events.bind(events_exchange, key)
            await self.link.adopt_online()
            if self._management is None:
                logger.warning(
                    "RabbitMQ's management API is not configured "
                    "(DEVICECONTROL_RABBITMQ_MANAGEMENT_URL): a device connected with a "
                    "secret since rotated stays connected until it disconnects"
                )
            self._readers.append(
                asyncio.create_task(self._read(events, self._event), name="link: broker events")
            )
        self._ready = True
        self.link.broker_ready()

    async def shutdown(self) -> None:
        """Stop reading (what was not acknowledged stays with RabbitMQ) and disconnect."""
        self._ready = False
        for reader in self._readers:
            reader.cancel()
        await asyncio.gather(*self._readers, return_exceptions=True)
        if self._acking:
            await asyncio.gather(*self._acking, return_exceptions=True)
        if self._connection is not None:
            with contextlib.suppress(Exception):
                await self._connection.close()

    async def publish(self, topic: str, payload: bytes) -> None:
        """A command, persistent, confirmed by RabbitMQ before this returns; mandatory, so
        that one no subscription queue takes comes back (``NotSubscribed``)."""
        if self._exchange is None:
            raise ConnectionError("RabbitMQ is out of reach")
        message = aio_pika.Message(payload, delivery_mode=aio_pika.DeliveryMode.PERSISTENT)
        key = amqp_names.routing_key(topic)
        try:
            await self._exchange.publish(message, routing_key=key, mandatory=True)
        except PublishError as returned:
            raise NotSubscribed(topic) from returned

    async def close_connection(self, connection: DeviceConnection) -> None:
        """End a device's connection through the management API (the module's docstring);
        ``ManagementError`` when it refuses or is out of reach (the rotation watch logs it
        and tries again a second later)."""
        if self._management is None:
            return
        serial_number = connection.identity.serial_number
        for name, user in list(self._by_name.items()):  # a rotation is rare: no index
            if user == serial_number and _address(name) == connection.address:
                await self._management.close_connection(name)

    def _lost(self, *_: object) -> None:
        """The connection dropped (aio-pika reconnects): RabbitMQ keeps the shard's queue."""
        if self._ready:
            self._away = True
            self.link.broker_lost()

    # --- reading -------------------------------------------------------------------------

    async def _read(self, queue: AbstractQueue, handle: Handler) -> None:
        """One queue's deliveries, one after another, in order; each acknowledged in its
        turn once handled (a device's message: once stored)."""

        async def settled_once_handled(delivery: Delivery) -> None:
            delivery.settle_when_stored(await handle(delivery.acknowledgement))

        await take_in_order(self._deliveries(queue), settled_once_handled, self._failing)

    async def _deliveries(self, queue: AbstractQueue) -> AsyncIterator[Delivery]:
        acknowledgements = InOrderAcknowledgements(self._acknowledge)
        async with queue.iterator() as deliveries:
            async for delivery in deliveries:
                yield acknowledgements.arrived(delivery)

    def _acknowledge(self, delivery: AbstractIncomingMessage) -> None:
        task = asyncio.ensure_future(delivery.ack())
        self._acking.add(task)
        task.add_done_callback(self._acked)

    def _acked(self, task: asyncio.Task[None]) -> None:
        self._acking.discard(task)
        if not task.cancelled() and task.exception() is not None:
            self._failing.failed()  # the channel is gone: RabbitMQ delivers it again

    async def _message(self, delivery: AbstractIncomingMessage) -> Stored | None:
        """A device's message of this link's shard: stored under the registered device,
        whichever link follows its connection."""
        if self._away:  # the first delivery since the connection came back
            self._away = False
            self.link.broker_back()
        topic = amqp_names.mqtt_topic(delivery.routing_key or "")
        return await self.link.message(topic, delivery.body, redelivery=bool(delivery.redelivered))

    async def _event(self, delivery: AbstractIncomingMessage) -> None:
        """An event of the event exchange, as the link's report (``reports.py``)."""
        headers = delivery.headers or {}
        match delivery.routing_key:
            case "connection.created":
                await self._connected(_text(headers.get("name")), _text(headers.get("user")))
            case "connection.closed":
                serial_number = self._by_name.pop(_text(headers.get("name")), None)
                if serial_number is not None:
                    address = _address(_text(headers.get("name")))
                    self.link.device_left(serial_number, address=address)
            case "binding.created" | "binding.deleted":
                serial_number = amqp_names.subscriber(_text(headers.get("destination_name")))
                source = _text(headers.get("source_name"))
                if serial_number is None or source != amqp_names.EXCHANGE:
                    return
                topic_filter = amqp_names.mqtt_topic(_text(headers.get("routing_key")))
                if delivery.routing_key == "binding.created":
                    await self.link.device_subscribed(serial_number, topic_filter)
                else:
                    self.link.device_unsubscribed(serial_number, topic_filter)

    async def _connected(self, name: str, user: str) -> None:
        """A connection: the hook let in only username = client id for a device, and the
        event names the user; whether its session kept a subscription, RabbitMQ is asked."""
        if not is_serial_number(user):  # the service's own account
            return
        self._by_name[name] = user
        await self.link.device_connected(
            user,
            username=user,
            address=_address(name),
            clean=None,
            kept_subscription=await self._kept_subscription(user),
        )

    async def _kept_subscription(self, serial_number: str) -> bool:
        """Whether the device's session holds a subscription queue (the hook lets it
        subscribe to its commands only): a persistent session resumed keeps its binding,
        and RabbitMQ says nothing of it again. Asked with a passive declare on a channel of
        its own (RabbitMQ closes a channel whose passive declare finds nothing). A clean
        session's old queue may still be there, about to go: a command published into it
        stays ``sent`` and goes again at the device's next subscription."""
        assert self._connection is not None
        for queue in amqp_names.subscription_queues(serial_number):
            try:
                async with self._connection.channel(publisher_confirms=False) as probe:
                    await probe.declare_queue(queue, passive=True)
            except ChannelNotFoundEntity:
                continue
            return True
        return False
