"""The device link's faces, typed: what it needs of a broker (``Broker``), and what a
broker calls on it. No third-party import: an adapter (``endpoint/``, the service's own;
``mosquitto/``, a client of Mosquitto) depends on these, never the link on an adapter.

What a broker calls comes in three faces, so that an adapter implements and calls only
what it needs: ``ProvingLink``, for a broker that asks the link to prove each CONNECT (the
embedded endpoint: who the device is, the session it resumes, a socket refused, flow
control), implemented by ``DeviceLink`` (``core.py``); and for a broker that proves devices
itself and reports them afterwards (Mosquitto, RabbitMQ), in broker-neutral terms,
``CoordinatingLink`` (the link that follows connections: connected, left, subscribed,
unsubscribed, a message) and ``StoringLink`` (a link that only stores its share: a
message), implemented once by ``BrokerReports`` (``reports.py``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from devicecontrol.devices.identity import DeviceIdentity
from devicecontrol.devices.link.sessions import Resumed
from devicecontrol.devices.topics import MessageKind

__all__ = [
    "Broker",
    "CoordinatingLink",
    "DeviceConnection",
    "LinkError",
    "NotSubscribed",
    "ProvingLink",
    "Stored",
    "StoringLink",
]

# done once a device's message is in the database (its PUBACK may go then)
Stored = asyncio.Future[None]


class LinkError(Exception):
    """The link cannot start: the message is one line for the operator."""


class NotSubscribed(Exception):
    """``Broker.publish`` found no subscription to the topic: nothing was delivered (a
    broker that routes, RabbitMQ, says so of a connection it had no binding of yet)."""


@dataclass(eq=False, slots=True)
class DeviceConnection:
    """One connection of a device, from its accepted CONNECT to its end. One of these
    lives for every connected device: the event that ``wait_ended`` waits on is made only
    when someone waits (an asyncio.Event is 900 bytes, a tenth of a connection's cost)."""

    identity: DeviceIdentity
    address: str
    subscribed: bool = False  # to its commands topic: deliveries may go out
    is_ended: bool = False
    _ending: asyncio.Event | None = None

    def end(self) -> None:
        self.is_ended = True
        if self._ending is not None:
            self._ending.set()

    async def wait_ended(self) -> None:
        if self.is_ended:
            return
        if self._ending is None:
            self._ending = asyncio.Event()
        await self._ending.wait()


class Broker(Protocol):
    """What the link needs of a broker: it starts, stops, carries the link's commands to
    devices and ends a connection; it reports what devices do to a ``Link``."""

    # what the logs name: {"listen": HOST:PORT} or {"broker": URL without the password}
    where: dict[str, str]
    # the devices stay connected to the broker when the link stops (an external broker):
    # stopping neither waits for their connections to end nor sets them offline
    devices_outlive_link: bool
    # the broker itself ends a connection whose secret was rotated (Mosquitto's dynamic
    # security does): the link does not look for them
    checks_secrets: bool
    # this link keeps the events' log, expires commands and rolls readings up: one link of
    # several on one broker does (RabbitMQ's shard 0), every other stores messages only
    coordinates: bool
    # every connection is reported, none lost (RabbitMQ's durable events, the endpoint's
    # own sockets); False: a device heard from unannounced is taken as connected (the
    # Mosquitto log lines a link away too long never read)
    reports_every_connection: bool
    # how long the link keeps a persistent session after its connection ended (None: as
    # long as the broker, which keeps it)
    session_expiry_s: float | None

    @property
    def ready(self) -> bool:
        """Commands can be published now (an external broker may be out of reach)."""

    @property
    def port(self) -> int | None:
        """The port devices connect to, when this process listens (else None)."""

    async def start(self) -> None:
        """Serve devices; ``LinkError`` with a one-line reason if it cannot. A broker that
        coordinates sets who is online first (``reset_online`` or ``adopt_online``)."""

    async def shutdown(self) -> None: ...

    async def publish(self, topic: str, payload: bytes) -> None:
        """A command to the one session allowed to subscribe to ``topic``, at QoS 1;
        ``NotSubscribed`` when the broker knows that session has no subscription to it."""

    async def close_connection(self, connection: DeviceConnection) -> None: ...


class ProvingLink(Protocol):
    """What a broker that asks the link to prove each CONNECT calls (the embedded
    endpoint): the rules on topics, subscriptions and messages are the link's; a broker
    asks, and obeys."""

    async def reset_online(self) -> None:
        """Everyone offline: the broker knows of no connection (it starts, or lost track)."""

    async def authenticate(
        self, *, client_id: str | None, username: str | None, password: str | None, address: str
    ) -> DeviceIdentity | None: ...

    def claim(
        self, device: DeviceIdentity, address: str
    ) -> tuple[DeviceConnection, DeviceConnection | None]:
        """A proved device's new connection, and the one it takes over (if any)."""

    def begin(
        self,
        connection: DeviceConnection,
        *,
        clean: bool | None,
        kept_subscription: bool | None = None,
    ) -> Resumed:
        """A claimed connection starts: online, and its persistent session resumed (by
        ``clean``, or as the broker says: ``kept_subscription``)."""

    def connection_ended(self, connection: DeviceConnection) -> None: ...

    def connection_refused(self, reason: str, address: str) -> None:
        """A socket closed for breaking a packet rule, or never proving itself."""

    def subscribed(self, serial_number: str, topic_filter: str) -> bool:
        """A device subscribed to ``topic_filter``; False: the filter is refused (a
        device subscribes to its own commands only)."""

    def unsubscribed(self, serial_number: str, topic_filter: str) -> bool:
        """A device unsubscribed; True when that was its commands subscription."""

    def publication_kind(self, serial_number: str, topic: str) -> MessageKind | None:
        """What a device's publication on ``topic`` is; None: not one of its own topics
        (dropped, counted; acknowledged all the same)."""

    def publication(
        self,
        serial_number: str,
        kind: MessageKind,
        payload: bytes,
        *,
        redelivery: bool = False,
        arrived_at: datetime | None = None,
    ) -> Stored | None:
        """Queue a device's message for the database: done once stored (its PUBACK may go
        then), None when dropped at once (counted)."""

    async def room(self) -> None:
        """Return once the link can take more messages (flow control: wait before a read)."""


class StoringLink(Protocol):
    """What a broker that proves devices itself reports to a link that stores its share of
    the devices' messages (a storing shard; ``reports.py`` translates it once)."""

    async def message(
        self,
        topic: str,
        payload: bytes,
        *,
        arrived_at: datetime | None = None,
        redelivery: bool = False,
        retained: bool = False,
    ) -> Stored | None:
        """A message on ``topic``: done once stored (it may be acknowledged then), None when
        dropped at once (counted; acknowledged all the same). ``arrived_at``: when the
        broker's client received it; ``retained``: the broker's stored copy."""

    def broker_ready(self) -> None:
        """The broker is (back) in reach: what could not be delivered goes now."""

    def broker_lost(self) -> None:
        """The link's connection to the broker dropped: the devices' messages wait there."""

    def broker_back(self) -> None:
        """The link reads the broker again: called before the first message that waited
        (the rate credits the time away, ``absence.py``)."""


class CoordinatingLink(StoringLink, Protocol):
    """What such a broker also reports to the link that follows who is connected (one per
    fleet: shard 0): connections and subscriptions, as the broker gives them."""

    @property
    def connections(self) -> Mapping[str, DeviceConnection]:
        """The current connection of each connected device, by serial number."""

    async def reset_online(self) -> None:
        """Everyone offline: the broker's record of the time the link was away is gone."""

    async def adopt_online(self) -> None:
        """The devices the database has online are connected and subscribed (the broker
        replays what happened while the link was away)."""

    async def device_connected(
        self,
        client_id: str,
        *,
        username: str | None,
        address: str,
        clean: bool | None,
        kept_subscription: bool | None = None,
    ) -> None:
        """A connection the broker accepted (``clean``: None when the broker does not say;
        ``kept_subscription``: whether the broker says its session holds a subscription)."""

    def device_left(self, client_id: str, *, address: str | None = None) -> None: ...

    async def device_subscribed(self, client_id: str, topic_filter: str) -> None: ...

    def device_unsubscribed(self, client_id: str, topic_filter: str) -> None: ...
