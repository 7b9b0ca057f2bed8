"""What a broker that proves devices itself reports, translated into the link's calls once
(Mosquitto and RabbitMQ; the embedded endpoint proves each CONNECT and calls the core).

An adapter parses its broker's dialect (Mosquitto's log lines, RabbitMQ's events and
queues) into these broker-neutral reports: a device connected (client id, username,
address, session flag), left, subscribed, unsubscribed, and a message (its arrival, whether
it is a redelivery or a retained copy). What follows from them is written here, for every
broker: who is a device (a registered serial, logged in with username = client id), a
login that borrows a device's client id, the take-over, persistent sessions (the core's),
a device heard from whose connect the broker's reports missed, the retained-copy rule, and
then the core's topic rule, rate and ``online``.

Two faces (``ports.py``): ``CoordinatingLink`` for the link that follows connections
(shard 0), ``StoringLink`` for a link that only stores its share of the messages.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING

from devicecontrol.devices import topics
from devicecontrol.devices.identity import DeviceIdentity
from devicecontrol.devices.link.identities import DeviceIdentities
from devicecontrol.devices.link.ports import DeviceConnection, Stored

if TYPE_CHECKING:
    from devicecontrol.devices.link.core import DeviceLink

__all__ = ["BrokerReports"]


class BrokerReports:
    """``ports.CoordinatingLink`` (and so ``ports.StoringLink``) over the link's core."""

    def __init__(self, link: DeviceLink) -> None:
        self.link = link
        self.identities = DeviceIdentities(link.find_device)
        self._foreign: set[str] = set()  # client ids in use by a login that is no device

    @property
    def connections(self) -> Mapping[str, DeviceConnection]:
        return self.link.connections

    @property
    def _takes_up(self) -> bool:
        """A device heard from whose connect was never reported is taken as connected: on
        the link that follows connections, when its broker's reports may have gaps."""
        broker = self.link.broker
        return broker.coordinates and not broker.reports_every_connection

    # --- who is online when the broker (re)starts -------------------------------------

    async def reset_online(self) -> None:
        """Everyone offline: the broker's record of the time the link was away is gone."""
        await self.link.reset_online()
        self._foreign.clear()

    async def adopt_online(self) -> None:
        await self.link.adopt_online()

    def broker_ready(self) -> None:
        self.link.broker_ready()

    def broker_lost(self) -> None:
        self.link.broker_lost()

    def broker_back(self) -> None:
        self.link.broker_back()

    # --- connections --------------------------------------------------------------------

    async def device_connected(
        self,
        client_id: str,
        *,
        username: str | None,
        address: str,
        clean: bool | None,
        kept_subscription: bool | None = None,
    ) -> None:
        """A connection the broker accepted. ``clean``: its clean-session flag (None: the
        broker does not say); ``kept_subscription``: what the broker says of the session's
        subscription, when it says (else the link's record of persistent sessions does)."""
        if username != client_id:  # the service, a command, an administrator
            self._foreign.add(client_id)
            previous = self.link.connections.get(client_id)
            if previous is not None:  # it took the client id over from the device
                self.link.connection_ended(previous)
            return
        self._foreign.discard(client_id)
        device = await self.identities.of(client_id, fresh=True)
        if device is None:  # no registered serial: nobody's device
            return
        connection, previous = self.link.claim(device, address)
        if previous is not None:  # MQTT's take-over: the device stays online
            self.link.connection_ended(previous)
        self.link.begin(connection, clean=clean, kept_subscription=kept_subscription)

    def device_left(self, client_id: str, *, address: str | None = None) -> None:
        """A connection ended; ``address``, when given, must be the device's current
        connection's (an older one's end, reported late, changes nothing)."""
        if client_id in self._foreign:
            self._foreign.discard(client_id)
            return
        connection = self.link.connections.get(client_id)
        if connection is None or (address is not None and connection.address != address):
            return
        self.link.connection_ended(connection)

    async def device_subscribed(self, client_id: str, topic_filter: str) -> None:
        if client_id not in self.link.connections and (
            not self._takes_up or await self._take_up(client_id, subscribed=False) is None
        ):
            return
        self.link.subscribed(client_id, topic_filter)

    def device_unsubscribed(self, client_id: str, topic_filter: str) -> None:
        if client_id in self.link.connections:
            self.link.unsubscribed(client_id, topic_filter)

    async def _take_up(self, client_id: str, *, subscribed: bool) -> DeviceConnection | None:
        """A device the broker shows active whose connect was never reported (it expired
        while the link was away): connected now, and taken as subscribed (at least once)."""
        if client_id in self._foreign:
            return None
        device = await self.identities.of(client_id)
        if device is None:
            return None
        connection, _ = self.link.claim(device, "")
        self.link.begin(connection, clean=None, kept_subscription=subscribed)
        return connection

    # --- messages -----------------------------------------------------------------------

    async def message(
        self,
        topic: str,
        payload: bytes,
        *,
        arrived_at: datetime | None = None,
        redelivery: bool = False,
        retained: bool = False,
    ) -> Stored | None:
        """A device's message, queued under the registered device of its topic: done once
        stored, None when it is dropped at once. A retained copy (the broker's, sent again
        at each subscription) never is: the original was taken when it came."""
        serial_number = topics.publisher_of(topic)
        if serial_number is None or retained:
            return None
        device = await self._publisher(serial_number)
        if device is None:
            return None
        kind = self.link.publication_kind(serial_number, topic)
        if kind is None:
            return None
        return self.link.identified_publication(
            device, kind, payload, redelivery=redelivery, arrived_at=arrived_at
        )

    async def _publisher(self, serial_number: str) -> DeviceIdentity | None:
        connection = self.link.connections.get(serial_number)
        if connection is not None:
            return connection.identity
        if self._takes_up:
            taken_up = await self._take_up(serial_number, subscribed=True)
            return taken_up.identity if taken_up is not None else None
        return await self.identities.of(serial_number)
