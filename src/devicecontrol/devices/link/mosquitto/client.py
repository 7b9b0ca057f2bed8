"""The device link as a client of an external broker: Mosquitto 2 with its dynamic-security
plugin (contract §9, ``DEVICECONTROL_MQTT_URL``); a ``ports.Broker``.

Mosquitto checks who connects and what they may publish and subscribe to (the accounts the
operators' commands keep in step, ``dynsec.py``). What the link needs to know of devices it
reads off the broker itself, in one MQTT session of its own (``mqtt_session/``), and
reports to the link in its broker-neutral terms (``reports.py``, ``ports.CoordinatingLink``):

- Mosquitto's log, which it publishes on ``$SYS/broker/log/...`` (``log.py``): connections
  made and ended (with their clean-session flag), subscriptions. These become the reports
  ``device_connected``, ``device_left``, ``device_subscribed``, ``device_unsubscribed``, so
  ``online``, ``last_seen``, persistent sessions, deliveries and their rules are the link's;
- the devices' messages, on ``devices/+/state`` and ``devices/+/commands/result``, reported
  as ``message`` with their arrival, redelivery and retained flags.

The session is persistent (a fixed client id, clean session off, QoS 1 subscriptions), so
that the broker keeps what happens while the link is away (a restart of ``serve``, a lost
connection) and replays it in order. Whether that replay is a complete record is
``replay.py``'s to say: if it is, the devices the database has online are taken as
connected and subscribed and the replay brings them up to date; otherwise (or with no
session at all: a first start, a broker that lost it) everyone is set offline, and a
device is online again when it is next heard of: a connect, or a subscription or message
of a connection whose connect line was lost (taken as subscribed: at least once).

With several link processes this is shard 0's session: it reads the log alone, and takes
its share of the devices' messages as a member of the links' shared subscriptions; the
other shards (``share.py``) store the rest (``shards.py``). Mosquitto's log lines live 20 s,
so its reports may have gaps (``reports_every_connection`` is False): a device heard from
whose connect line was lost is taken as connected. While the broker is out of reach the
link leaves ``online`` as it was: unknown, not changed.
"""

from __future__ import annotations

import asyncio
import logging

from devicecontrol.config import MqttUrl
from devicecontrol.devices.link.mosquitto import log as mosquitto_log
from devicecontrol.devices.link.mosquitto.log import (
    Connected,
    Ended,
    LogEvent,
    Subscribed,
    TakenOver,
    Unsubscribed,
)
from devicecontrol.devices.link.mosquitto.replay import Replay
from devicecontrol.devices.link.mosquitto.session_broker import KEEPALIVE_S, SessionBroker
from devicecontrol.devices.link.mosquitto.shards import SESSION_ID, is_link_client, session_plan
from devicecontrol.devices.link.mqtt_session.client import Message, SessionBegan
from devicecontrol.devices.link.ports import CoordinatingLink, Stored

__all__ = ["MosquittoBroker"]

logger = logging.getLogger("devicecontrol.devices.link")


class MosquittoBroker(SessionBroker[CoordinatingLink]):
    """The link's ``ports.Broker`` on Mosquitto (the module's docstring); its session, its
    reader and publishing are ``session_broker.py``'s."""

    devices_outlive_link = True
    checks_secrets = True  # Mosquitto's setClientPassword ends the old secret's connection
    coordinates = True
    reports_every_connection = False  # log lines live 20 s: a long absence misses some
    session_expiry_s: float | None = None  # Mosquitto keeps persistent sessions

    def __init__(
        self,
        link: CoordinatingLink,
        url: MqttUrl,
        *,
        ca_file: str | None,
        keepalive_s: int = KEEPALIVE_S,
        shards: int = 1,
    ) -> None:
        """Shard 0 of ``shards`` link processes (``DEVICECONTROL_LINK_SHARD``)."""
        super().__init__(
            link,
            url,
            plan=session_plan((0, shards)),
            ca_file=ca_file,
            keepalive_s=keepalive_s,
            failing="the device link failed on a broker event",
        )
        self.where = {"broker": str(url)}
        self._decided = asyncio.Event()  # who is online is settled for this connection
        self._replay: Replay | None = None  # held until the link's own connect line

    # --- the connection ---------------------------------------------------------------

    async def start(self) -> None:
        """Connect, check the broker's log, take in the replay; ``LinkError`` (one line)
        if the broker cannot be reached, refuses the service's user or does not log."""
        await self._connect("link: broker events", then=self._decided.wait)

    async def shutdown(self) -> None:
        """Leave the session (the broker keeps it, and what comes meanwhile), after taking
        in every message already received."""
        await self._stop_connection()
        await self._take_in_received()
        await self._stop_reading()
        if self._replay is not None:
            await self._end_replay()

    # --- what the broker tells ------------------------------------------------------------

    async def _received(self, message: Message) -> None:
        if self._replay is not None:
            if self._replay.take(message):  # settled once the replay is handled
                await self._end_replay()
        else:
            message.settle_when_stored(await self._handle(message))

    async def _session_began(self, session: SessionBegan) -> None:
        self._decided.clear()
        if self._replay is not None:  # a replay that never ended: the connection dropped
            await self._end_replay()
        if session.present:
            self._replay = Replay(SESSION_ID)
            return
        await self.link.reset_online()
        self._decided.set()
        self._ready = True

    async def _end_replay(self) -> None:
        replay, self._replay = self._replay or Replay(SESSION_ID), None
        if replay.complete:
            await self.link.adopt_online()
        else:
            logger.warning(
                "the MQTT broker at %s kept no complete record of the time the device link "
                "was away (its log lines live 20 s): every device is offline until it is "
                "heard from again",
                self.url,
            )
            await self.link.reset_online()
        self._decided.set()
        for message in replay.messages:
            message.settle_when_stored(await self._handle(message))
        self._ready = True
        self.link.broker_ready()

    async def _handle(self, message: Message) -> Stored | None:
        """Take in one message: a log line becomes a report; a device's message is queued
        for the database (its future)."""
        if message.topic in mosquitto_log.TOPICS:
            event = mosquitto_log.parse(message.topic, message.payload)
            if event is not None:
                await self._logged(event)
            return None
        return await self._report(message)

    async def _logged(self, event: LogEvent) -> None:
        """A log line, as the link's report (``reports.py``)."""
        if is_link_client(event.client_id):  # its own sessions, the other shards', the probe
            return
        match event:
            case Connected():
                await self.link.device_connected(
                    event.client_id,
                    username=event.username,
                    address=event.address,
                    clean=event.clean_session,
                )
            case Ended():
                self.link.device_left(event.client_id)
            case Subscribed():
                await self.link.device_subscribed(event.client_id, event.topic)
            case Unsubscribed():
                self.link.device_unsubscribed(event.client_id, event.topic)
            case TakenOver():
                pass  # the new connection's own line follows
