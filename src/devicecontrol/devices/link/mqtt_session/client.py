"""The link's session as aiomqtt sees it: a subclass of aiomqtt's client that hands the
session's start and every message to the link in order (``inbox``), and acknowledges each
message only once the link settles it.

aiomqtt keeps CONNACK's session-present flag to itself, and queues messages where they
cannot be taken out once the connection has ended: this subclass overrides its two paho
callbacks for that (aiomqtt is pinned below its next major for it).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import aiomqtt
from paho.mqtt import client as paho

from devicecontrol.clock import arrival_time
from devicecontrol.devices.link.acks import InOrderAcknowledgements, Turn
from devicecontrol.devices.link.ports import Stored

__all__ = ["Message", "SessionBegan", "SessionClient"]

# what acknowledges a message of the session: its packet id and QoS
_Ack = tuple[int, int]


@dataclass(frozen=True, slots=True)
class SessionBegan:
    """The broker accepted the link's CONNECT; ``present``: it kept the session."""

    present: bool


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


class SessionClient(aiomqtt.Client):
    """aiomqtt's client, for the link's session: the session's start and its messages go
    to ``inbox`` in the order paho handed them over, and ``peek`` sees each message as it
    arrives.

    It acknowledges nothing on arrival (paho's manual acknowledgement): a QoS 1 message's
    PUBACK goes once the link has stored it, so a link that dies before leaves it with the
    broker, which delivers it again to the session (contract §9, Readings). The broker sends
    at most its limit of messages in flight unacknowledged: that is the flow control.
    """

    def __init__(
        self,
        *args: Any,
        inbox: asyncio.Queue[SessionBegan | Message],
        peek: Callable[[Message], None],
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
            self.inbox.put_nowait(SessionBegan(self.session_present))
        super()._on_connect(client, userdata, flags, reason_code, properties)

    def _on_message(self, client: paho.Client, userdata: Any, message: paho.MQTTMessage) -> None:
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
