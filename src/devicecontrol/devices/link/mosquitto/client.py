"""The device link as a client of an external broker: Mosquitto 2 with its dynamic-security
plugin (contract §9, ``DEVICECONTROL_MQTT_URL``); a ``ports.Broker``.

Mosquitto checks who connects and what they may publish and subscribe to (the accounts the
operators' commands keep in step, ``dynsec.py``). What the link needs to know of devices it
reads off the broker itself, in one MQTT session of its own:

- Mosquitto's log, which it publishes on ``$SYS/broker/log/...`` (``mosquitto_log.py``):
  connections made and ended, subscriptions. These become the same calls the embedded
  broker makes on the link (``claim``, ``connection_started``, ``connection_ended``,
  ``subscribed``), so ``online``, ``last_seen``, deliveries and their rules are the link's;
- the devices' messages, on ``devices/+/state`` and ``devices/+/commands/result``, handed to
  ``publication`` like the embedded broker's (rate limit, size, JSON, metrics).

The session is persistent (a fixed client id, clean session off, QoS 1 subscriptions), so
that the broker keeps what happens while the link is away (a restart of ``serve``, a lost
connection) and replays it in order. Mosquitto gives its log lines a 20-second lifetime,
though: after a longer absence the connects and disconnects of that time are gone while
the devices' messages are not. The link tells the two cases apart by its own connection's
end: the broker logs it first of all once the link is gone, so if that line is in the
replay, nothing after it expired either. Then the devices the database has online are
taken as connected and subscribed and the replay brings them up to date; otherwise (or
with no session at all: a first start, a broker that lost it) everyone is set offline, and
a device is online again when it is next heard of: a connect, or a subscription or
message of a connection whose connect line was lost (taken as subscribed: at least once).

The replay ends with the line of the link's own new connection. Every (re)connection also
checks that the broker publishes its log at all: a probe client connects and subscribes,
and its lines must come back within ``LOG_CHECK_S`` (else a one-line error at start-up).
Only client ids that are registered serial numbers and that logged in with username =
client id count. While the broker is out of reach the link reconnects with a growing delay
(logged once) and leaves ``online`` as it was: unknown, not changed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import aiomqtt
from paho.mqtt import client as paho

from devicecontrol.clock import monotonic
from devicecontrol.config import MqttUrl
from devicecontrol.controllers.identity import is_serial_number
from devicecontrol.devices import topics
from devicecontrol.devices.identity import DeviceIdentity
from devicecontrol.devices.link.acks import InOrderAcknowledgements, Turn
from devicecontrol.devices.link.mosquitto import log as mosquitto_log
from devicecontrol.devices.link.mosquitto.connection import (
    one_line,
    subscription_refused,
    tls_context,
)
from devicecontrol.devices.link.mosquitto.dynsec import RESPONSE_TOPIC
from devicecontrol.devices.link.mosquitto.log import (
    Connected,
    Ended,
    LogEvent,
    Subscribed,
    TakenOver,
    Unsubscribed,
)
from devicecontrol.devices.link.outage import Outage
from devicecontrol.devices.link.ports import DeviceConnection, LinkError, Stored, TrustingLink
from devicecontrol.devices.link.sessions import PersistentSessions
from devicecontrol.observability.logs import emit

SESSION_ID = "devicecontrol-link"  # the link's persistent session: one link per broker
PROBE_ID = f"{SESSION_ID}-probe"
DEVICE_TOPICS = ("devices/+/state", "devices/+/commands/result")
SUBSCRIPTIONS = (*mosquitto_log.TOPICS, *DEVICE_TOPICS)
# paho pings after this long without a packet from the broker and gives the connection up
# when no PINGRESP came this long after: a stalled network is noticed within twice this
KEEPALIVE_S = 30
TIMEOUT_S = 10  # the broker's CONNACK, SUBACK, PUBACK
LOG_CHECK_S = 10
FIRST_RETRY_S = 1.0
MAX_RETRY_S = 30.0
CANCEL_AGAIN_S = 0.5  # stopping: a cancellation still running after this is sent again
# a client id that is no registered serial is looked up again after this long at the
# earliest (a broker account without a controller must not cost a query per message)
UNKNOWN_FOR_S = 10.0
logger = logging.getLogger("devicecontrol.devices.link")


@dataclass(frozen=True, slots=True)
class _Session:
    """The broker accepted the link's CONNECT; ``present``: it kept the session."""

    present: bool


# what acknowledges a message of the session: its packet id and QoS
_Ack = tuple[int, int]


@dataclass(slots=True)
class _Message:
    """One message of the link's session; ``settle`` once it is stored or handled: its
    PUBACK then goes, in the order the messages came (``acks.py``)."""

    topic: str
    payload: bytes
    redelivery: bool = False  # the PUBLISH's DUP flag
    turn: Turn[_Ack] | None = None  # its place among the acknowledgements (None: none)

    def settle(self) -> None:
        if self.turn is not None:
            self.turn.settle()

    def settle_when_stored(self, stored: Stored | None) -> None:
        if self.turn is not None:
            self.turn.settle_when_stored(stored)


class SessionClient(aiomqtt.Client):
    """aiomqtt's client, for the link's session. aiomqtt keeps CONNACK's session-present
    flag to itself, and queues messages where they cannot be taken out once the connection
    has ended; this one puts both in ``inbox``, in the order paho handed them over, and
    shows each message to ``peek`` as it arrives.

    It acknowledges nothing on arrival (paho's manual acknowledgement): a QoS 1 message's
    PUBACK goes once the link has stored it, so a link that dies before leaves it with the
    broker, which delivers it again to the session (contract §9, Readings). Mosquitto sends
    at most ``max_inflight_messages`` unacknowledged: that is the flow control.
    """

    def __init__(
        self,
        *args: Any,
        inbox: asyncio.Queue[_Session | _Message],
        peek: Callable[[_Message], None],
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self._client.manual_ack_set(True)
        self.inbox = inbox
        self.peek = peek
        self.session_present = False
        self._acks = InOrderAcknowledgements(self._acknowledge)

    def _acknowledge(self, ack: _Ack) -> None:
        mid, qos = ack
        if qos > 0:
            self._client.ack(mid, qos)  # a no-op once the connection is gone

    def _on_connect(
        self,
        client: paho.Client,
        userdata: Any,
        flags: paho.ConnectFlags,
        reason_code: Any,
        properties: Any = None,
    ) -> None:
        if reason_code == paho.CONNACK_ACCEPTED and not self._connected.done():
            self.session_present = bool(flags.session_present)
            self.inbox.put_nowait(_Session(self.session_present))
        super()._on_connect(client, userdata, flags, reason_code, properties)

    def _on_message(self, client: paho.Client, userdata: Any, message: paho.MQTTMessage) -> None:
        try:
            topic = message.topic
        except UnicodeDecodeError:
            topic = ""  # no topic of ours: handled as nothing, acknowledged in its turn
        received = _Message(
            topic,
            bytes(message.payload),
            redelivery=bool(message.dup),
            turn=self._acks.arrived((message.mid, message.qos)),
        )
        self.peek(received)
        self.inbox.put_nowait(received)


class MosquittoBroker:
    """The link's ``ports.Broker`` on Mosquitto (the module's docstring)."""

    devices_outlive_link = True
    checks_secrets = True  # Mosquitto's setClientPassword ends the old secret's connection

    def __init__(
        self,
        link: TrustingLink,
        url: MqttUrl,
        *,
        ca_file: str | None,
        keepalive_s: int = KEEPALIVE_S,
    ) -> None:
        self.link = link
        self.url = url
        self.keepalive_s = keepalive_s
        self.where = {"broker": str(url)}
        self._tls = tls_context(url, ca_file)
        self._inbox: asyncio.Queue[_Session | _Message] = asyncio.Queue()
        self._client: SessionClient | None = None  # while connected
        self._ready = False
        self._runner: asyncio.Task[None] | None = None
        self._reader: asyncio.Task[None] | None = None
        self._identities: dict[str, DeviceIdentity] = {}
        self._unknown: dict[str, float] = {}  # client id -> when to look it up again
        self._decided = asyncio.Event()  # who is online is settled for this connection
        self._replay: list[_Message] | None = None  # buffered until the link's own connect
        self._replay_complete = False
        self._persistent = PersistentSessions(expiry_s=None)  # Mosquitto keeps them
        self._foreign: set[str] = set()  # client ids in use by a login that is not a device
        self._probe_lines: set[type[LogEvent]] = set()
        self._probe_seen = asyncio.Event()
        self._lost = Outage(
            "the device link lost the MQTT broker at %s (%s); reconnecting, devices' online "
            "left as it was meanwhile"
        )
        self._event_failing = Outage("the device link failed on a broker event")

    @property
    def ready(self) -> bool:
        return self._ready and self._client is not None

    @property
    def port(self) -> None:
        """Devices connect to the broker, not to this process."""
        return None

    # --- the connection ---------------------------------------------------------------

    async def start(self) -> None:
        """Connect, check the broker's log, take in the replay; ``LinkError`` (one line)
        if the broker cannot be reached, refuses the service's user or does not log."""
        self._reader = asyncio.create_task(self._read(), name="link: broker events")
        first: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._runner = asyncio.create_task(self._run(first), name="link: broker connection")
        try:
            await first
            await self._decided.wait()
        except BaseException:
            await self.shutdown()
            raise

    async def shutdown(self) -> None:
        """Leave the session (the broker keeps it, and what comes meanwhile), after taking
        in every message already received."""
        if self._runner is not None:
            await _cancelled(self._runner)
        if self._reader is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._inbox.join(), TIMEOUT_S)
            self._reader.cancel()
            await asyncio.gather(self._reader, return_exceptions=True)
        if self._replay is not None:
            await self._end_replay()

    async def publish(self, topic: str, payload: bytes) -> None:
        client = self._client
        if client is None:
            raise aiomqtt.MqttError("the MQTT broker is out of reach")
        await client.publish(topic, payload, qos=1)

    async def close_connection(self, connection: DeviceConnection) -> None:
        """Mosquitto ends connections itself (a rotated secret, a take-over)."""

    def _new_client(self) -> SessionClient:
        return SessionClient(
            self.url.host,
            self.url.port,
            identifier=SESSION_ID,
            username=self.url.username,
            password=self.url.password,
            clean_session=False,
            keepalive=self.keepalive_s,
            tls_context=self._tls,
            timeout=TIMEOUT_S,
            inbox=self._inbox,
            peek=self._peek,
        )

    async def _run(self, first: asyncio.Future[None]) -> None:
        """Stay connected: reconnect with a growing delay, logging the loss once."""
        delay = FIRST_RETRY_S
        while True:
            client = self._new_client()
            try:
                async with client:
                    await self._begin(client)
                    if not first.done():
                        first.set_result(None)
                    if self._lost.recovered():
                        emit(logger, logging.INFO, {"event": "device_link_broker_back",
                                                    **self.where})  # fmt: skip
                    delay = FIRST_RETRY_S
                    async for _ in client.messages:  # they go to the inbox: this waits
                        pass
            except (aiomqtt.MqttError, LinkError, TimeoutError) as exc:
                reason = one_line(exc.__cause__ or exc)
                if not first.done():
                    if not isinstance(exc, LinkError):
                        exc = LinkError(
                            f"cannot connect to the MQTT broker at {self.url} "
                            f"(DEVICECONTROL_MQTT_URL): {reason}"
                        )
                    first.set_exception(exc)
                    return
                self._lost.failed(self.url, reason, exc_info=False)
            finally:
                self._client = None
                self._ready = False
            await asyncio.sleep(delay)
            delay = min(delay * 2, MAX_RETRY_S)

    async def _begin(self, client: SessionClient) -> None:
        """A new session subscribes; then the probe checks that the log comes through."""
        self._client = client
        if not client.session_present:
            granted = await client.subscribe([(topic, 1) for topic in SUBSCRIPTIONS])
            refused = [
                topic
                for topic, code in zip(SUBSCRIPTIONS, granted, strict=True)
                if subscription_refused(code)
            ]
            if refused:
                raise LinkError(
                    f"the MQTT broker at {self.url} does not let the service's user subscribe "
                    f"to {', '.join(refused)} (its role: docs/OPERATIONS.md)"
                )
        self._probe_lines.clear()
        self._probe_seen.clear()
        async with aiomqtt.Client(
            self.url.host,
            self.url.port,
            identifier=PROBE_ID,
            username=self.url.username,
            password=self.url.password,
            clean_session=True,
            tls_context=self._tls,
            timeout=TIMEOUT_S,
        ) as probe:
            await probe.subscribe(RESPONSE_TOPIC, qos=0)
        try:
            async with asyncio.timeout(LOG_CHECK_S):
                await self._probe_seen.wait()
        except TimeoutError:
            raise LinkError(
                f"the MQTT broker at {self.url} does not publish its log of connections and "
                "subscriptions on $SYS/broker/log (log_dest topic, log_type notice, subscribe "
                "and unsubscribe, connection_messages true: docs/OPERATIONS.md)"
            ) from None

    def _peek(self, message: _Message) -> None:
        """The probe's lines, noticed on arrival: the log check must not wait for a long
        replay to be taken in."""
        if message.topic in (mosquitto_log.NOTICE, mosquitto_log.SUBSCRIBE):
            event = _log_event(message)
            if event is not None and event.client_id == PROBE_ID:
                self._probe_lines.add(type(event))
                if {Connected, Subscribed} <= self._probe_lines:
                    self._probe_seen.set()

    # --- what the broker tells ------------------------------------------------------------

    async def _read(self) -> None:
        """Everything the session receives, one after another, in order."""
        while True:
            item = await self._inbox.get()
            try:
                if isinstance(item, _Session):
                    await self._session_began(item)
                elif self._replay is not None:
                    await self._replayed(item)  # settled once the replay is handled
                else:
                    item.settle_when_stored(await self._handle(item))
            except Exception:
                if isinstance(item, _Message):
                    item.settle()  # not stored: the broker would only send it again
                self._event_failing.failed()
            else:
                self._event_failing.recovered()
            finally:
                self._inbox.task_done()

    async def _session_began(self, session: _Session) -> None:
        self._decided.clear()
        if self._replay is not None:  # a replay that never ended: the connection dropped
            await self._end_replay()
        if session.present:
            self._replay, self._replay_complete = [], False
            return
        await self._forget_everyone()
        self._decided.set()
        self._ready = True

    async def _replayed(self, message: _Message) -> None:
        event = _log_event(message)
        if isinstance(event, Connected) and event.client_id == SESSION_ID:
            message.settle()
            await self._end_replay()
            return
        if isinstance(event, Ended | TakenOver) and event.client_id == SESSION_ID:
            self._replay_complete = True  # the first line after the link left is here
        assert self._replay is not None
        self._replay.append(message)

    async def _end_replay(self) -> None:
        replay, self._replay = self._replay or [], None
        if self._replay_complete:
            await self.link.adopt_online()
        else:
            logger.warning(
                "the MQTT broker at %s kept no complete record of the time the device link "
                "was away (its log lines live 20 s): every device is offline until it is "
                "heard from again",
                self.url,
            )
            await self._forget_everyone()
        self._decided.set()
        for message in replay:
            message.settle_when_stored(await self._handle(message))
        self._ready = True
        self.link.broker_ready()

    async def _forget_everyone(self) -> None:
        await self.link.reset_online()
        self._persistent.clear()
        self._foreign.clear()

    async def _handle(self, message: _Message) -> Stored | None:
        """Take in one message; a device's is queued for the database (its future)."""
        if message.topic in mosquitto_log.TOPICS:
            event = _log_event(message)
            if event is not None:
                await self._logged(event)
            return None
        serial_number = topics.publisher_of(message.topic)
        if serial_number is None:
            return None
        connection = self.link.connections.get(serial_number)
        if connection is None and await self._take_up(serial_number) is None:
            return None
        kind = self.link.publication_kind(serial_number, message.topic)
        if kind is None:
            return None
        return self.link.publication(
            serial_number, kind, message.payload, redelivery=message.redelivery
        )

    async def _logged(self, event: LogEvent) -> None:
        if event.client_id in (PROBE_ID, SESSION_ID):
            return
        match event:
            case Connected():
                await self._connected(event)
            case Ended():
                self._ended(event.client_id)
            case Subscribed():
                await self._subscribed(event.client_id, event.topic)
            case Unsubscribed():
                connection = self.link.connections.get(event.client_id)
                if connection is not None and self.link.unsubscribed(event.client_id, event.topic):
                    self._persistent.unsubscribed(event.client_id)
            case TakenOver():
                pass  # the new connection's own line follows

    async def _connected(self, event: Connected) -> None:
        serial_number = event.client_id
        if event.username != serial_number:  # the service, a command, an administrator
            self._foreign.add(serial_number)
            previous = self.link.connections.get(serial_number)
            if previous is not None:  # it took the client id over from the device
                self.link.connection_ended(previous)
            return
        self._foreign.discard(serial_number)
        device = await self._identity(serial_number, fresh=True)
        if device is None:
            return
        connection, previous = self.link.claim(device, event.address)
        if previous is not None:  # MQTT's take-over: the device stays online
            self.link.connection_ended(previous)
        self.link.connection_started(connection)
        resumed = self._persistent.connected(serial_number, clean=event.clean_session)
        if resumed.subscribed:  # a resumed session keeps its subscription
            self.link.subscribed(serial_number, topics.commands_topic(serial_number))

    def _ended(self, client_id: str) -> None:
        if client_id in self._foreign:
            self._foreign.discard(client_id)
            return
        connection = self.link.connections.get(client_id)
        if connection is not None:
            self.link.connection_ended(connection)
            self._persistent.ended(client_id)

    async def _subscribed(self, client_id: str, topic: str) -> None:
        known = self.link.connections.get(client_id) is not None
        if not known and await self._take_up(client_id, subscribe=False) is None:
            return
        if self.link.subscribed(client_id, topic):
            self._persistent.subscribed(client_id)

    async def _take_up(self, client_id: str, *, subscribe: bool = True) -> DeviceConnection | None:
        """A device the broker shows active whose connect line the link never got (it
        expired while the link was away): connected now, and taken as subscribed."""
        if client_id in self._foreign:
            return None
        device = await self._identity(client_id)
        if device is None:
            return None
        connection, _ = self.link.claim(device, "")
        self.link.connection_started(connection)
        if subscribe:
            self.link.subscribed(client_id, topics.commands_topic(client_id))
        return connection

    async def _identity(self, serial_number: str, *, fresh: bool = False) -> DeviceIdentity | None:
        """The registered device of a client id (kept: ids and types do not change).
        ``fresh``: a new login, looked up even if the id was unknown a moment ago (the
        command that registered it commits just after the broker took the account)."""
        if not is_serial_number(serial_number):
            return None
        known = self._identities.get(serial_number)
        if known is not None:
            return known
        if not fresh and self._unknown.get(serial_number, 0.0) > monotonic():
            return None
        device = await self.link.find_device(serial_number)
        if device is None:
            if len(self._unknown) > 10_000:  # bounded: forget the lot, it only saves queries
                self._unknown.clear()
            self._unknown[serial_number] = monotonic() + UNKNOWN_FOR_S
            return None
        self._unknown.pop(serial_number, None)
        self._identities[serial_number] = device
        return device


def _log_event(message: _Message) -> LogEvent | None:
    if message.topic not in mosquitto_log.TOPICS:
        return None
    return mosquitto_log.parse(message.topic, message.payload)


async def _cancelled(task: asyncio.Task[None]) -> None:
    """Cancel ``task`` and wait for its end, cancelling again while it runs: on Python 3.11
    ``asyncio.wait_for`` (aiomqtt waits with it) swallows a cancellation that meets the
    result it waited for, and the connection's loop would then run on."""
    while not task.done():
        task.cancel()
        await asyncio.wait({task}, timeout=CANCEL_AGAIN_S)
    await asyncio.gather(task, return_exceptions=True)
