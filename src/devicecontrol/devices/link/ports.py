"""The device link's faces, typed: what it needs of a broker (``Broker``), and what a
broker calls on it. No third-party import: an adapter (``endpoint/``, the service's own;
``mosquitto/``, a client of Mosquitto) depends on these, never the link on an adapter.

What a broker calls comes in three faces, so that an adapter implements and calls only
what it needs: ``Link``, what every broker reports (connections, subscriptions, messages);
``ProvingLink``, for a broker that asks the link to prove each CONNECT (the endpoint: who
the device is, a socket refused, flow control); ``TrustingLink``, for a broker that proves
devices itself and tells the link afterwards (Mosquitto: a device by serial, the online
devices of before, the broker back in reach). ``DeviceLink`` (``core.py``) is all three.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from devicecontrol.devices.identity import DeviceIdentity
from devicecontrol.devices.topics import MessageKind

__all__ = [
    "Broker",
    "DeviceConnection",
    "Link",
    "LinkError",
    "NotSubscribed",
    "ProvingLink",
    "Stored",
    "TrustingLink",
]

# done once a device's message is in the database (its PUBACK may go then)
Stored = asyncio.Future[None]


class LinkError(Exception):
    """The link cannot start: the message is one line for the operator."""


class NotSubscribed(Exception):
    """``Broker.publish`` found no subscription to the topic: nothing was delivered (a
    broker that routes, RabbitMQ, says so of a connection it had no binding of yet)."""


@dataclass(eq=False)
class DeviceConnection:
    """One connection of a device, from its accepted CONNECT to its end."""

    identity: DeviceIdentity
    address: str
    subscribed: bool = False  # to its commands topic: deliveries may go out
    ended: asyncio.Event = field(default_factory=asyncio.Event)


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

    @property
    def ready(self) -> bool:
        """Commands can be published now (an external broker may be out of reach)."""

    @property
    def port(self) -> int | None:
        """The port devices connect to, when this process listens (else None)."""

    async def start(self) -> None:
        """Serve devices; ``LinkError`` with a one-line reason if it cannot. A broker that
        coordinates calls ``Link.reset_online`` or ``TrustingLink.adopt_online`` first."""

    async def shutdown(self) -> None: ...

    async def publish(self, topic: str, payload: bytes) -> None:
        """A command to the one session allowed to subscribe to ``topic``, at QoS 1;
        ``NotSubscribed`` when the broker knows that session has no subscription to it."""

    async def close_connection(self, connection: DeviceConnection) -> None: ...


class Link(Protocol):
    """What every broker reports: who is connected, what they subscribe to and send. The
    rules on topics, subscriptions and messages are the link's: a broker asks, and obeys."""

    async def reset_online(self) -> None:
        """Everyone offline: the broker knows of no connection (it starts, or lost track)."""

    def claim(
        self, device: DeviceIdentity, address: str
    ) -> tuple[DeviceConnection, DeviceConnection | None]:
        """A proved device's new connection, and the one it takes over (if any)."""

    def connection_started(self, connection: DeviceConnection) -> None: ...

    def connection_ended(self, connection: DeviceConnection) -> None: ...

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
        then), None when dropped at once (counted). ``arrived_at``: when the broker's
        client received it, if it was held before (else now)."""

    def identified_publication(
        self,
        device: DeviceIdentity,
        kind: MessageKind,
        payload: bytes,
        *,
        redelivery: bool = False,
        arrived_at: datetime | None = None,
    ) -> Stored | None:
        """``publication`` of a device this link holds no connection of."""


class ProvingLink(Link, Protocol):
    """What a broker that asks the link to prove each CONNECT also calls (the endpoint)."""

    async def authenticate(
        self, *, client_id: str | None, username: str | None, password: str | None, address: str
    ) -> DeviceIdentity | None: ...

    def connection_refused(self, reason: str, address: str) -> None:
        """A socket closed for breaking a packet rule, or never proving itself."""

    async def room(self) -> None:
        """Return once the link can take more messages (flow control: wait before a read)."""


class TrustingLink(Link, Protocol):
    """What a broker that proves devices itself also calls (Mosquitto): it learns of them
    afterwards, and may have been out of reach meanwhile."""

    @property
    def connections(self) -> Mapping[str, DeviceConnection]:
        """The current connection of each connected device, by serial number."""

    async def find_device(self, serial_number: str) -> DeviceIdentity | None:
        """A registered device by serial."""

    async def adopt_online(self) -> None:
        """The devices the database has online are connected and subscribed (the broker
        replays what happened while the link was away)."""

    def broker_ready(self) -> None:
        """The broker is (back) in reach: what could not be delivered goes now."""

    def broker_lost(self) -> None:
        """The link's connection to the broker dropped: the devices' messages wait there."""

    def broker_back(self) -> None:
        """The link reads the broker again: called before the first message that waited
        (the rate credits the time away, ``absence.py``)."""
