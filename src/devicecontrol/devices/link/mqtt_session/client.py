"""One connection of the link's kept session, on paho-mqtt's public API: paho parses and
writes MQTT, asyncio's event loop drives its socket (paho's "external event loop":
``on_socket_open`` and friends, ``loop_read``, ``loop_write``, ``loop_misc``), and every
callback runs on the loop's thread, in the order the broker's packets came.

What the session needs that a general client hides: CONNACK's session-present flag, each
message handed over with its place among the acknowledgements, and no PUBACK until the link
has settled the message (paho's ``manual_ack_set`` and ``ack``).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from paho.mqtt import client as paho
from paho.mqtt.enums import CallbackAPIVersion, MQTTErrorCode
from paho.mqtt.reasoncodes import ReasonCode

from devicecontrol.clock import arrival_time
from devicecontrol.devices.link.acks import InOrderAcknowledgements, Turn
from devicecontrol.devices.link.ports import Stored

__all__ = ["Message", "SessionBegan", "SessionClient", "SessionError"]

# what acknowledges a message of the session: its packet id and QoS
_Ack = tuple[int, int]
MISC_EVERY_S = 1.0  # paho's keepalive upkeep: a PINGREQ due, a PINGRESP overdue
CLOSE_WITHIN_S = 2.0  # leaving: the DISCONNECT written, else the socket closed anyway


class SessionError(Exception):
    """The connection failed, was refused or ended; its text says why, in paho's words."""


@dataclass(frozen=True, slots=True)
class SessionBegan:
    """The broker accepted the link's CONNECT; ``present``: it kept the session."""

    present: bool

    def settle(self) -> None:
        """Nothing to acknowledge."""


@dataclass(slots=True)
class Message:
    """One message of the link's session; settled once it is stored or handled: its
    PUBACK then goes, in the order the messages came (``acks.py``)."""

    topic: str
    payload: bytes
    redelivery: bool = False  # the PUBLISH's DUP flag
    # the RETAIN flag: the broker's stored copy, sent because the session subscribed (it
    # sends what it routes, live or queued, without the flag)
    retained: bool = False
    # when it came off the socket: a reading's arrival, before any wait in the link
    arrived_at: datetime = field(default_factory=arrival_time)
    turn: Turn[_Ack] | None = None  # its place among the acknowledgements (None: none)

    def settle(self) -> None:
        if self.turn is not None:
            self.turn.settle()

    def settle_when_stored(self, stored: Stored | None) -> None:
        if self.turn is not None:
            self.turn.settle_when_stored(stored)


class SessionClient:
    """One connection of the session (a fixed client id, clean session off, MQTT 3.1.1).
    The session's start and its messages go to ``inbox`` in the order they came, and
    ``peek`` sees each message as it arrives.

    It acknowledges nothing on arrival: a QoS 1 message's PUBACK goes once the link has
    stored it, so a link that dies before leaves it with the broker, which delivers it again
    to the session (contract §9, Readings). The broker sends at most its limit of messages
    in flight unacknowledged: that is the flow control.
    """

    def __init__(
        self,
        host: str,
        port: int,
        *,
        client_id: str,
        username: str | None,
        password: str | None,
        keepalive_s: int,
        tls: ssl.SSLContext | None,
        timeout_s: float,
        inbox: asyncio.Queue[SessionBegan | Message],
        peek: Callable[[Message], None],
    ) -> None:
        self.host = host
        self.port = port
        self.keepalive_s = keepalive_s
        self.timeout_s = timeout_s
        self.inbox = inbox
        self.peek = peek
        self._loop = asyncio.get_running_loop()
        self._mqtt = paho.Client(
            CallbackAPIVersion.VERSION2,
            client_id=client_id,
            clean_session=False,
            protocol=paho.MQTTv311,
        )
        self._mqtt.manual_ack_set(True)
        self._mqtt.connect_timeout = timeout_s
        if username is not None:
            self._mqtt.username_pw_set(username, password)
        if tls is not None:
            self._mqtt.tls_set_context(tls)
        self._mqtt.on_socket_open = self._socket_opened
        self._mqtt.on_socket_close = self._socket_closing
        self._mqtt.on_socket_register_write = self._write_wanted
        self._mqtt.on_socket_unregister_write = self._write_done
        self._mqtt.on_connect = self._connack
        self._mqtt.on_disconnect = self._ended
        self._mqtt.on_message = self._message
        self._mqtt.on_subscribe = self._acknowledged
        self._mqtt.on_unsubscribe = self._acknowledged
        self._mqtt.on_publish = self._published
        self._acks = InOrderAcknowledgements(self._acknowledge)
        self._began: asyncio.Future[bool] = self._loop.create_future()
        self._end: asyncio.Future[None] = self._loop.create_future()
        self._waiting: dict[int, asyncio.Future[Any]] = {}  # by packet id
        self._socket: socket.socket | None = None
        self._upkeep: asyncio.Task[None] | None = None

    # --- what the session does ---------------------------------------------------------

    async def connect(self) -> bool:
        """Connect and wait for CONNACK; whether the broker kept the session. paho opens the
        socket (and its TLS) blocking, so it does so on a worker thread."""
        try:
            await self._loop.run_in_executor(
                None, self._mqtt.connect, self.host, self.port, self.keepalive_s
            )
        except (OSError, ValueError) as exc:  # the socket's, TLS's, a bad host
            raise SessionError(str(exc) or type(exc).__name__) from exc
        self._upkeep = asyncio.create_task(self._keep_alive(), name="link: session upkeep")
        return bool(await self._within(self._began))

    async def subscribe(self, topics: list[tuple[str, int]]) -> list[ReasonCode]:
        """Each topic's granted QoS or refusal, as the SUBACK says."""
        result, mid = self._mqtt.subscribe(topics)
        return await self._answer(result, mid)  # type: ignore[no-any-return]

    async def unsubscribe(self, topics: list[str]) -> None:
        result, mid = self._mqtt.unsubscribe(topics)
        await self._answer(result, mid)

    async def publish(self, topic: str, payload: bytes) -> None:
        """At QoS 1; returns once the broker's PUBACK came."""
        sent = self._mqtt.publish(topic, payload, qos=1)
        await self._answer(sent.rc, sent.mid)

    async def ended(self) -> None:
        """Wait until the connection ends; ``SessionError`` says why."""
        await self._end

    async def close(self) -> None:
        """Leave: DISCONNECT (the broker keeps the session); the socket is closed within
        ``CLOSE_WITHIN_S`` either way."""
        if not self._end.done() and self._mqtt.disconnect() == MQTTErrorCode.MQTT_ERR_SUCCESS:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(self._end), CLOSE_WITHIN_S)
        if self._socket is not None:  # paho did not get to close it
            self._forget_socket()
            self._socket.close()
            self._socket = None
        self._lost("left")
        if self._upkeep is not None:
            self._upkeep.cancel()
            await asyncio.gather(self._upkeep, return_exceptions=True)

    async def __aenter__(self) -> SessionClient:
        try:
            await self.connect()
        except BaseException:
            await self.close()
            raise
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    # --- waiting for the broker ------------------------------------------------------------

    async def _answer(self, result: MQTTErrorCode, mid: int | None) -> Any:
        if result != MQTTErrorCode.MQTT_ERR_SUCCESS or mid is None:
            raise SessionError(paho.error_string(result))
        answer = self._waiting[mid] = self._loop.create_future()
        try:
            return await self._within(answer)
        finally:
            self._waiting.pop(mid, None)

    async def _within(self, answer: asyncio.Future[Any]) -> Any:
        """The broker's answer, or the connection's end, within ``timeout_s``."""
        async with asyncio.timeout(self.timeout_s):
            await asyncio.wait({answer, self._end}, return_when=asyncio.FIRST_COMPLETED)
        if answer.done():
            return answer.result()
        self._end.result()  # raises why it ended
        raise SessionError("the connection ended")

    def _answered(self, mid: int, value: object) -> None:
        """A SUBACK, UNSUBACK or PUBACK: its caller registered before paho could read it
        (both on the loop's thread); one nobody waits for any more (timed out) is dropped."""
        answer = self._waiting.get(mid)
        if answer is not None and not answer.done():
            answer.set_result(value)

    # --- paho's callbacks (on the loop's thread, except the socket's opening) ---------------

    def _connack(
        self, _client: paho.Client, _userdata: Any, flags: paho.ConnectFlags, reason: ReasonCode,
        _properties: Any,
    ) -> None:  # fmt: skip
        if self._began.done():
            return
        if reason.is_failure:
            self._began.set_exception(SessionError(str(reason)))
            return
        self._began.set_result(bool(flags.session_present))
        self.inbox.put_nowait(SessionBegan(bool(flags.session_present)))

    def _ended(
        self, _client: paho.Client, _userdata: Any, _flags: Any, reason: ReasonCode,
        _properties: Any,
    ) -> None:  # fmt: skip
        self._lost(str(reason))

    def _lost(self, reason: str) -> None:
        if not self._end.done():
            self._end.set_exception(SessionError(reason))
            self._end.exception()  # retrieved: nobody need wait for it
        if not self._began.done():
            self._began.set_exception(SessionError(reason))
            self._began.exception()

    def _message(self, _client: paho.Client, _userdata: Any, message: paho.MQTTMessage) -> None:
        try:
            topic = message.topic
        except UnicodeDecodeError:
            topic = ""  # no topic of ours: handled as nothing, acknowledged in its turn
        received = Message(
            topic,
            bytes(message.payload),
            redelivery=bool(message.dup),
            retained=bool(message.retain),
            turn=self._acks.arrived((message.mid, message.qos)),
        )
        self.peek(received)
        self.inbox.put_nowait(received)

    def _acknowledge(self, ack: _Ack) -> None:
        mid, qos = ack
        if qos > 0:
            self._mqtt.ack(mid, qos)  # nothing once the connection is gone

    def _acknowledged(
        self, _client: paho.Client, _userdata: Any, mid: int, codes: list[ReasonCode],
        _properties: Any,
    ) -> None:  # fmt: skip
        self._answered(mid, codes)

    def _published(
        self, _client: paho.Client, _userdata: Any, mid: int, _reason: ReasonCode,
        _properties: Any,
    ) -> None:  # fmt: skip
        self._answered(mid, None)

    def _socket_opened(self, _client: paho.Client, _userdata: Any, sock: Any) -> None:
        """On the connecting thread: the loop reads the socket from now on."""
        self._socket = sock
        self._loop.call_soon_threadsafe(self._watch, sock, self._loop.add_reader, self._readable)

    def _socket_closing(self, _client: paho.Client, _userdata: Any, sock: Any) -> None:
        """paho closes it next."""
        self._forget_socket()
        self._socket = None

    def _write_wanted(self, _client: paho.Client, _userdata: Any, sock: Any) -> None:
        """Possibly on the connecting thread (the CONNECT is queued there)."""
        self._loop.call_soon_threadsafe(self._watch, sock, self._loop.add_writer, self._writable)

    def _write_done(self, _client: paho.Client, _userdata: Any, sock: Any) -> None:
        with contextlib.suppress(ValueError, OSError):  # already closed
            self._loop.remove_writer(sock.fileno())

    def _watch(self, sock: Any, add: Callable[..., None], callback: Callable[[], None]) -> None:
        """Watch the socket, unless it closed meanwhile (the call came from another thread)."""
        watched = self._socket
        if watched is not None and sock is watched and watched.fileno() >= 0:
            add(watched.fileno(), callback)

    def _forget_socket(self) -> None:
        sock = self._socket
        if sock is not None and sock.fileno() >= 0:
            self._loop.remove_reader(sock.fileno())
            self._loop.remove_writer(sock.fileno())

    def _readable(self) -> None:
        self._mqtt.loop_read()

    def _writable(self) -> None:
        self._mqtt.loop_write()

    async def _keep_alive(self) -> None:
        """paho's timers, each ``MISC_EVERY_S`` while the connection lives."""
        while True:
            await asyncio.sleep(MISC_EVERY_S)
            if self._mqtt.loop_misc() != MQTTErrorCode.MQTT_ERR_SUCCESS:
                return
