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
import contextlib

import aiomqtt

from devicecontrol.config import MqttUrl
from devicecontrol.devices import topics
from devicecontrol.devices.link.identities import DeviceIdentities
from devicecontrol.devices.link.mosquitto.reconnect import TIMEOUT_S, KeptConnection, cancelled
from devicecontrol.devices.link.mosquitto.session import Message, SessionBegan
from devicecontrol.devices.link.mosquitto.shards import session_plan
from devicecontrol.devices.link.outage import Outage
from devicecontrol.devices.link.ports import DeviceConnection, Stored, TrustingLink

__all__ = ["MosquittoShare"]

KEEPALIVE_S = 30  # as shard 0's: a stalled network is noticed within twice this
STORE_WAIT_S = 5.0  # stopping: what came before the group was left is stored within this


class MosquittoShare:
    """The link's ``ports.Broker`` for shard I > 0 on Mosquitto (the module's docstring)."""

    devices_outlive_link = True
    checks_secrets = True  # Mosquitto's setClientPassword ends the old secret's connection
    coordinates = False

    def __init__(
        self,
        link: TrustingLink,
        url: MqttUrl,
        *,
        shard: tuple[int, int],
        ca_file: str | None,
        keepalive_s: int = KEEPALIVE_S,
    ) -> None:
        self.link = link
        self.url = url
        self.plan = session_plan(shard)
        self.where = {"broker": str(url), "session": self.plan.client_id}
        self._inbox: asyncio.Queue[SessionBegan | Message] = asyncio.Queue()
        self._connection = KeptConnection(
            url,
            plan=self.plan,
            ca_file=ca_file,
            keepalive_s=keepalive_s,
            inbox=self._inbox,
            lost=self._lost,
        )
        self._identities = DeviceIdentities(link.find_device)
        self._storing: set[Stored] = set()  # handed to the link, not stored yet
        self._ready = False
        self._runner: asyncio.Task[None] | None = None
        self._reader: asyncio.Task[None] | None = None
        self._failing = Outage("the device link failed on a broker message")

    @property
    def ready(self) -> bool:
        return self._ready and self._connection.client is not None

    @property
    def port(self) -> None:
        """Devices connect to the broker, not to this process."""
        return None

    async def start(self) -> None:
        """Connect and subscribe; ``LinkError`` (one line) if the broker cannot be reached,
        refuses the service's user or one of its subscriptions."""
        self._reader = asyncio.create_task(self._read(), name="link: broker messages")
        first: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        runner = self._connection.run(first)
        self._runner = asyncio.create_task(runner, name="link: broker connection")
        try:
            await first
        except BaseException:
            await self.shutdown()
            raise
        self._ready = True
        self.link.broker_ready()

    async def shutdown(self) -> None:
        """Leave the group, store what came before, and leave the session (the broker
        keeps it, empty)."""
        self._ready = False
        await self._connection.leave(self.plan.shared)
        if self._reader is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._inbox.join(), TIMEOUT_S)
        if self._storing:  # acknowledged to the broker while still connected
            await asyncio.wait(set(self._storing), timeout=STORE_WAIT_S)
        if self._runner is not None:
            await cancelled(self._runner)
        if self._reader is not None:
            self._reader.cancel()
            await asyncio.gather(self._reader, return_exceptions=True)

    async def publish(self, topic: str, payload: bytes) -> None:
        """Commands are shard 0's; this only serves a caller that asks anyway."""
        client = await self._connection.connected_client(TIMEOUT_S)
        if client is None:
            raise aiomqtt.MqttError("the MQTT broker is out of reach")
        await client.publish(topic, payload, qos=1)

    async def close_connection(self, connection: DeviceConnection) -> None:
        """Mosquitto ends connections itself (a rotated secret, a take-over)."""

    def _lost(self) -> None:
        self._ready = False

    async def _read(self) -> None:
        """Everything the session receives, one after another, in order."""
        while True:
            item = await self._inbox.get()
            try:
                if isinstance(item, SessionBegan):
                    self._ready = True
                else:
                    item.settle_when_stored(self._storing_until_done(await self._handle(item)))
            except Exception:
                if isinstance(item, Message):
                    item.settle()  # not stored: the broker would only send it again
                self._failing.failed()
            else:
                self._failing.recovered()
            finally:
                self._inbox.task_done()

    def _storing_until_done(self, stored: Stored | None) -> Stored | None:
        if stored is not None and not stored.done():
            self._storing.add(stored)
            stored.add_done_callback(self._storing.discard)
        return stored

    async def _handle(self, message: Message) -> Stored | None:
        """A device's message, stored under the registered device of its topic."""
        if message.retained:  # a stored copy: the link took the original when it came
            return None
        serial_number = topics.publisher_of(message.topic)
        if serial_number is None:
            return None
        device = await self._identities.of(serial_number)
        if device is None:
            return None
        kind = self.link.publication_kind(serial_number, message.topic)
        if kind is None:
            return None
        return self.link.identified_publication(
            device,
            kind,
            message.payload,
            redelivery=message.redelivery,
            arrived_at=message.arrived_at,
        )
