"""What the two Mosquitto adapters share: each link process's ``ports.Broker`` on Mosquitto
is one persistent session of its own (``shards.py``), kept up by ``mqtt_session/kept.py``; what
the session receives is taken in one item after another, in order.

Shard 0 (``client.py``) and shard I > 0 (``share.py``) differ in what they do with what
their session receives, in what ``start`` waits for and in how they stop; the rest
(the session, its reader, publishing, the properties the link asks for) is the same,
and lives here once so that the two cannot drift apart. Each adapter names its
``ports.Broker`` class attributes (``devices_outlive_link``, ``checks_secrets``,
``coordinates``) and its ``where`` itself: they say what it is.
"""

from __future__ import annotations

import asyncio
import contextlib
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Generic, TypeVar

from devicecontrol.config import MqttUrl
from devicecontrol.devices.link.acks import take_in_order
from devicecontrol.devices.link.mosquitto.log_check import LogCheck
from devicecontrol.devices.link.mosquitto.shards import SessionPlan
from devicecontrol.devices.link.mqtt_session.client import Message, SessionBegan, SessionError
from devicecontrol.devices.link.mqtt_session.connection import tls_context
from devicecontrol.devices.link.mqtt_session.kept import TIMEOUT_S, KeptConnection, cancelled
from devicecontrol.devices.link.outage import Outage
from devicecontrol.devices.link.ports import DeviceConnection, Stored, StoringLink

__all__ = ["KEEPALIVE_S", "SessionBroker"]

# paho pings after this long without a packet from the broker and gives the connection up
# when no PINGRESP came this long after: a stalled network is noticed within twice this
KEEPALIVE_S = 30
Face = TypeVar("Face", bound=StoringLink)  # the link's face the adapter reports to


class SessionBroker(ABC, Generic[Face]):
    """A link process's session on Mosquitto as a ``ports.Broker``, less what the session
    receives means (``_session_began``, ``_received``): the adapter's own."""

    def __init__(
        self,
        link: Face,
        url: MqttUrl,
        *,
        plan: SessionPlan,
        ca_file: str | None,
        keepalive_s: int,
        failing: str,
    ) -> None:
        """``failing`` is the warning logged once when taking in what the session receives
        begins to fail."""
        self.link = link
        self.url = url
        self.plan = plan
        self._inbox: asyncio.Queue[SessionBegan | Message] = asyncio.Queue()
        # the session that reads the broker's log checks first that the log comes
        log_check = LogCheck(url, tls_context(url, ca_file)) if plan.reads_log else None
        self._connection = KeptConnection(
            url,
            plan=plan,
            ca_file=ca_file,
            keepalive_s=keepalive_s,
            inbox=self._inbox,
            lost=self._lost,
            check=log_check.check if log_check is not None else None,
            peek=log_check.peek if log_check is not None else None,
        )
        self._ready = False
        self._runner: asyncio.Task[None] | None = None
        self._reader: asyncio.Task[None] | None = None
        self._failing = Outage(failing)

    @property
    def ready(self) -> bool:
        return self._ready and self._connection.client is not None

    @property
    def port(self) -> None:
        """Devices connect to the broker, not to this process."""
        return None

    async def publish(self, topic: str, payload: bytes) -> None:
        """At QoS 1, waiting up to ``TIMEOUT_S`` for a connection being made. Commands are
        shard 0's; a share only serves a caller that asks anyway."""
        client = await self._connection.connected_client(TIMEOUT_S)
        if client is None:
            raise SessionError("the MQTT broker is out of reach")
        await client.publish(topic, payload)

    async def close_connection(self, connection: DeviceConnection) -> None:
        """Nothing, on purpose (not a hook): Mosquitto ends connections itself (a rotated
        secret, a take-over)."""

    def _lost(self) -> None:
        """The connection ended: not ready (nothing is published) until the adapter has
        taken in the next one's beginning; the broker keeps the devices' messages."""
        self._ready = False
        self.link.broker_lost()

    # --- starting and stopping: the adapter's ``start`` and ``shutdown`` put these together

    async def _connect(
        self, reader: str, *, then: Callable[[], Awaitable[object]] | None = None
    ) -> None:
        """Start taking in what the session receives (a task named ``reader``) and the
        kept connection; return once the first connection is up and ``then`` (what the
        adapter waits for besides) has returned. A failure is raised after ``shutdown``."""
        self._reader = asyncio.create_task(self._read(), name=reader)
        first: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        runner = self._connection.run(first)
        self._runner = asyncio.create_task(runner, name="link: broker connection")
        try:
            await first
            if then is not None:
                await then()
        except BaseException:
            await self.shutdown()
            raise

    @abstractmethod
    async def shutdown(self) -> None:
        """The steps below, in the adapter's order: shard 0 ends the connection first and
        takes in what came; a share leaves its group while still connected."""

    async def _stop_connection(self) -> None:
        """End the kept connection; the broker keeps the session (it is persistent)."""
        if self._runner is not None:
            await cancelled(self._runner)

    async def _take_in_received(self) -> None:
        """Wait (up to ``TIMEOUT_S``) until every item received so far has been taken in."""
        if self._reader is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._inbox.join(), TIMEOUT_S)

    async def _stop_reading(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            await asyncio.gather(self._reader, return_exceptions=True)

    # --- what the session receives ------------------------------------------------------

    async def _read(self) -> None:
        """Everything the session receives, one after another, in order."""
        await take_in_order(self._received_items(), self._take, self._failing)

    async def _received_items(self) -> AsyncIterator[SessionBegan | Message]:
        while True:
            item = await self._inbox.get()
            try:
                yield item
            finally:  # taken in (``_take_in_received`` waits for it)
                self._inbox.task_done()

    async def _take(self, item: SessionBegan | Message) -> None:
        if isinstance(item, SessionBegan):
            self.link.broker_back()  # before what the session kept meanwhile
            await self._session_began(item)
        else:
            await self._received(item)

    @abstractmethod
    async def _session_began(self, session: SessionBegan) -> None:
        """A connection is up, with the session kept (``present``) or new."""

    async def _report(self, message: Message) -> Stored | None:
        """A message of the session as the link's report: a device's is queued for the
        database (its future)."""
        return await self.link.message(
            message.topic,
            message.payload,
            arrived_at=message.arrived_at,
            redelivery=message.redelivery,
            retained=message.retained,
        )

    @abstractmethod
    async def _received(self, message: Message) -> None:
        """A message: the adapter settles it (``Message.settle_when_stored``)."""
