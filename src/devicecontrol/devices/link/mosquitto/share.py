"""A link process that stores its share of the devices' messages off Mosquitto, beside the
link that follows who is connected (``DEVICECONTROL_LINK_SHARD=I/N``, I > 0); a
``ports.Broker``.

Its persistent session (``devicecontrol-link-I``, ``shards.py``) is a member of the links'
shared subscriptions: Mosquitto hands it every N-th message of the devices, and it stores
each under the registered device (``identified_publication``), whichever link holds the
device's connection. It reads no log, sets no one online or offline, delivers no command
and keeps no upkeep: shard 0 (``client.py``) does.

Stopping leaves the group first (it unsubscribes, and takes in what was routed to it
before), so that its share goes to the other links until it is back. A process that dies
without stopping stays a member: Mosquitto keeps handing its session its share, and
delivers it when a link of that shard connects again.
"""

from __future__ import annotations

import asyncio

from devicecontrol.config import MqttUrl
from devicecontrol.devices.link.mosquitto.session_broker import KEEPALIVE_S, SessionBroker
from devicecontrol.devices.link.mosquitto.shards import session_plan
from devicecontrol.devices.link.mqtt_session.client import Message, SessionBegan
from devicecontrol.devices.link.ports import Stored, StoringLink

__all__ = ["MosquittoShare"]

STORE_WAIT_S = 5.0  # stopping: what came before the group was left is stored within this


class MosquittoShare(SessionBroker[StoringLink]):
    """The link's ``ports.Broker`` for shard I > 0 on Mosquitto (the module's docstring);
    its session, its reader and publishing are ``session_broker.py``'s."""

    devices_outlive_link = True
    checks_secrets = True  # Mosquitto's setClientPassword ends the old secret's connection
    coordinates = False
    reports_every_connection = True  # it follows none
    session_expiry_s: float | None = None

    def __init__(
        self,
        link: StoringLink,
        url: MqttUrl,
        *,
        shard: tuple[int, int],
        ca_file: str | None,
        keepalive_s: int = KEEPALIVE_S,
    ) -> None:
        super().__init__(
            link,
            url,
            plan=session_plan(shard),
            ca_file=ca_file,
            keepalive_s=keepalive_s,
            failing="the device link failed on a broker message",
        )
        self.where = {"broker": str(url), "session": self.plan.client_id}
        self._storing: set[Stored] = set()  # handed to the link, not stored yet

    async def start(self) -> None:
        """Connect and subscribe; ``LinkError`` (one line) if the broker cannot be reached,
        refuses the service's user or one of its subscriptions."""
        await self._connect("link: broker messages")
        self._ready = True
        self.link.broker_ready()

    async def shutdown(self) -> None:
        """Leave the group, store what came before, and leave the session (the broker
        keeps it, empty)."""
        self._ready = False
        await self._connection.leave(self.plan.shared)
        await self._take_in_received()
        if self._storing:  # acknowledged to the broker while still connected
            await asyncio.wait(set(self._storing), timeout=STORE_WAIT_S)
        await self._stop_connection()
        await self._stop_reading()

    async def _session_began(self, session: SessionBegan) -> None:
        self._ready = True

    async def _received(self, message: Message) -> None:
        message.settle_when_stored(self._storing_until_done(await self._report(message)))

    def _storing_until_done(self, stored: Stored | None) -> Stored | None:
        if stored is not None and not stored.done():
            self._storing.add(stored)
            stored.add_done_callback(self._storing.discard)
        return stored
