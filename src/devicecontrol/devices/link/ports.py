"""The device link's two faces, typed: what it needs of a broker (``Broker``), and what a
broker calls on it (``Link``). No third-party import: an adapter (``endpoint/``, the service's own;
``mosquitto/``, a client of Mosquitto) depends on these, never the link on an adapter.

A new way to serve devices (a broker cluster that asks our hook, a lean device endpoint)
is a new ``Broker`` that makes the ``Link`` calls; no rule of contract §9 lives behind
either face.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from devicecontrol.devices.identity import DeviceIdentity

__all__ = ["Broker", "DeviceConnection", "Link", "LinkError", "Stored"]

# done once a device's message is in the database (its PUBACK may go then)
Stored = asyncio.Future[None]


class LinkError(Exception):
    """The link cannot start: the message is one line for the operator."""


@dataclass(eq=False)
class DeviceConnection:
    """One connection of a device, from its accepted CONNECT to its end."""

    identity: DeviceIdentity
    address: str
    subscribed: bool = False  # to its commands topic: deliveries may go out
    delivering: bool = False  # a delivery is waiting or running: the sweep leaves it be
    again: bool = False  # a command was made meanwhile: deliver once more after it
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

    @property
    def ready(self) -> bool:
        """Commands can be published now (an external broker may be out of reach)."""

    @property
    def port(self) -> int | None:
        """The port devices connect to, when this process listens (else None)."""

    async def start(self) -> None:
        """Serve devices; ``LinkError`` with a one-line reason if it cannot. It calls
        ``Link.reset_online`` or ``Link.adopt_online`` first."""

    async def shutdown(self) -> None: ...

    async def publish(self, topic: str, payload: bytes) -> None:
        """A command to the one session allowed to subscribe to ``topic``, at QoS 1."""

    async def close_connection(self, connection: DeviceConnection) -> None: ...


class Link(Protocol):
    """What a broker calls on the link: connections, subscriptions, messages, and whether
    it may read more from device sockets. ``DeviceLink`` (``core.py``) implements it."""

    @property
    def connections(self) -> Mapping[str, DeviceConnection]:
        """The current connection of each connected device, by serial number."""

    async def reset_online(self) -> None: ...

    async def adopt_online(self) -> None: ...

    def broker_ready(self) -> None: ...

    async def authenticate(
        self, *, client_id: str | None, username: str | None, password: str | None, address: str
    ) -> DeviceIdentity | None: ...

    async def find_device(self, serial_number: str) -> DeviceIdentity | None:
        """A registered device by serial (a broker that proves devices itself)."""

    def claim(
        self, device: DeviceIdentity, address: str
    ) -> tuple[DeviceConnection, DeviceConnection | None]: ...

    def connection_started(self, connection: DeviceConnection) -> None: ...

    def connection_ended(self, connection: DeviceConnection) -> None: ...

    def connection_refused(self, reason: str, address: str) -> None:
        """A socket closed for breaking a packet rule, or never proving itself."""

    def subscribed(self, serial_number: str, topic: str) -> None: ...

    def unsubscribed(self, serial_number: str, topic: str) -> None: ...

    def publication_refused(self, serial_number: str) -> None: ...

    def publication(
        self, serial_number: str, topic: str, payload: bytes, *, redelivery: bool = False
    ) -> Stored | None: ...

    async def room(self) -> None:
        """Return once the link can take more messages (flow control: wait before a read)."""
