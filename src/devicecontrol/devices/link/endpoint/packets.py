"""The device endpoint's packets: read one at a time off a device's socket, each checked
against contract §9's limits before it is decoded, with amqtt's codec (its packet
classes, used here as a library: no broker, no session).

A packet is refused from its fixed header when it is too large (before a byte of its
body is read), and closes the connection when it is malformed: a reserved type, a length
past four bytes, QoS 3, a wildcard or short topic in a PUBLISH, a body its type cannot
be decoded from. The reason is the metrics' label.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from enum import StrEnum
from typing import TypeVar

from amqtt.adapters import BufferReader
from amqtt.errors import MQTTError, NoDataError
from amqtt.mqtt.connect import ConnectPacket
from amqtt.mqtt.packet import (
    CONNECT,
    DISCONNECT,
    PINGREQ,
    PUBACK,
    PUBLISH,
    PUBREL,
    SUBSCRIBE,
    UNSUBSCRIBE,
    MQTTFixedHeader,
    PacketIdVariableHeader,
)
from amqtt.mqtt.publish import PublishPacket
from amqtt.mqtt.subscribe import SubscribePacket
from amqtt.mqtt.unsubscribe import UnsubscribePacket

__all__ = [
    "CONNECT",
    "DISCONNECT",
    "PINGREQ",
    "PUBACK",
    "PUBLISH",
    "PUBREL",
    "SUBSCRIBE",
    "UNSUBSCRIBE",
    "BrokenRule",
    "Packet",
    "PacketRuleBroken",
    "read_packet",
]


class BrokenRule(StrEnum):
    """Why a device's connection was closed: the metrics' reason label."""

    TOO_LARGE = "packet_too_large"
    MALFORMED = "malformed_packet"
    QOS2_HOARDING = "unfinished_qos2"
    NO_CONNECT = "no_connect"


_Decoded = TypeVar("_Decoded", ConnectPacket, PublishPacket, SubscribePacket, UnsubscribePacket)
_KNOWN_FROM_DEVICES = frozenset(
    {CONNECT, PUBLISH, PUBACK, PUBREL, SUBSCRIBE, UNSUBSCRIBE, PINGREQ, DISCONNECT}
)


class PacketRuleBroken(Exception):
    """A device's packet breaks a rule of §9 Limits: ``rule``."""

    def __init__(self, rule: BrokenRule) -> None:
        super().__init__(rule.value)
        self.rule = rule


@dataclass(slots=True)
class Packet:
    """One whole packet: its type, flags and body (what follows the fixed header)."""

    kind: int
    flags: int
    body: bytes

    @property
    def qos(self) -> int:
        return (self.flags >> 1) & 0x03

    async def connect(self) -> ConnectPacket:
        return await self._decode(ConnectPacket)

    async def publish(self) -> PublishPacket:
        if self.qos == 0x03:  # QoS 3 does not exist
            raise PacketRuleBroken(BrokenRule.MALFORMED)
        return await self._decode(PublishPacket)

    async def subscribe(self) -> SubscribePacket:
        return await self._decode(SubscribePacket)

    async def unsubscribe(self) -> UnsubscribePacket:
        return await self._decode(UnsubscribePacket)

    async def packet_id(self) -> int:
        header = MQTTFixedHeader(self.kind, self.flags, len(self.body))
        try:
            decoded = await PacketIdVariableHeader.from_stream(BufferReader(self.body), header)
        except (MQTTError, NoDataError, IndexError, ValueError):
            raise PacketRuleBroken(BrokenRule.MALFORMED) from None
        return int(decoded.packet_id)

    async def _decode(self, kind: type[_Decoded]) -> _Decoded:
        header = MQTTFixedHeader(self.kind, self.flags, len(self.body))
        try:
            return await kind.from_stream(BufferReader(self.body), fixed_header=header)
        except (MQTTError, NoDataError, UnicodeDecodeError, IndexError, ValueError):
            raise PacketRuleBroken(BrokenRule.MALFORMED) from None  # a wildcard, a short topic, ...


class _AfterFirstByte:
    """The stream as amqtt reads it (its ``ReaderAdapter``: exactly ``n`` bytes a read),
    with its first byte, already read by ``read_packet``, put back in front."""

    def __init__(self, first: bytes, reader: asyncio.StreamReader) -> None:
        self._first = first
        self._reader = reader

    async def read(self, n: int) -> bytes:
        first, self._first = self._first, b""
        return first + await self._reader.readexactly(n - len(first)) if n > len(first) else first

    def feed_eof(self) -> None:
        self._reader.feed_eof()


async def read_packet(reader: asyncio.StreamReader, *, max_packet: int) -> Packet | None:
    """The next whole packet; None once the device has closed the socket.

    An idle connection waits in a one-byte read, not inside amqtt's decoder: its waiting
    coroutines were about 1.5 KB of every idle device's cost."""
    try:
        first = await reader.readexactly(1)
    except asyncio.IncompleteReadError:
        return None
    try:
        header = await MQTTFixedHeader.from_stream(_AfterFirstByte(first, reader))
    except MQTTError:  # a remaining length past four bytes
        raise PacketRuleBroken(BrokenRule.MALFORMED) from None
    except (NoDataError, asyncio.IncompleteReadError):
        return None
    if header is None:
        return None
    if header.packet_type not in _KNOWN_FROM_DEVICES:
        raise PacketRuleBroken(BrokenRule.MALFORMED)  # reserved, or one only a broker sends
    if header.remaining_length > max_packet:
        raise PacketRuleBroken(BrokenRule.TOO_LARGE)  # before a byte of its body is read
    try:
        body = await reader.readexactly(header.remaining_length)
    except asyncio.IncompleteReadError:
        return None
    return Packet(header.packet_type, header.flags, body)
