"""The embedded broker's first look at every packet a device sends (contract §9, Limits).

amqtt 0.12.1 reads a packet whole before any check of ours runs: a 250 MB PUBLISH is in
memory before the 4 KiB rule sees it, a QoS 2 PUBLISH whose PUBREL never comes is kept
for the life of the session, and a packet it cannot parse (a wildcard in a PUBLISH
topic, a bad length) is skipped without reading the rest of it, so its remaining bytes
are taken for new packets. ``PacketGuard`` sits between the socket and amqtt: it reads
one packet at a time with amqtt's own decoders, refuses it from its fixed header when it
is too large, checks it, and only then hands its bytes to amqtt. A packet that breaks a
rule ends the connection; amqtt then sees the end of the stream, and nothing after the
offending packet is ever read as a packet. While the link's ingest queue is full it reads
nothing: the devices are held back by TCP flow control.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from amqtt.adapters import BufferReader, ReaderAdapter, StreamReaderAdapter
from amqtt.errors import MQTTError, NoDataError
from amqtt.mqtt.constants import QOS_2
from amqtt.mqtt.packet import (
    PUBLISH,
    PUBREL,
    RESERVED_0,
    RESERVED_15,
    MQTTFixedHeader,
    PacketIdVariableHeader,
)
from amqtt.mqtt.publish import PublishVariableHeader

# at most this many incoming QoS 2 messages may wait for their PUBREL on one connection
MAX_UNFINISHED_QOS2 = 10

# why a connection was closed: the metrics' reason label
TOO_LARGE = "packet_too_large"
MALFORMED = "malformed_packet"
QOS2_HOARDING = "unfinished_qos2"


class PacketRuleBroken(Exception):
    """A device's packet breaks a rule of §9 Limits; the text is the reason label."""


class PacketGuard(ReaderAdapter):
    """amqtt's reader for one device connection: whole, checked packets only.

    ``on_broken`` is told the reason once, when a packet breaks a rule; the guard has
    then closed the connection, and every later read ends the stream for amqtt.
    """

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        max_packet: int,
        on_broken: Callable[[str], None],
        room: Callable[[], Awaitable[None]],
    ) -> None:
        self._socket = StreamReaderAdapter(reader)
        self._writer = writer
        self._max_packet = max_packet
        self._on_broken = on_broken
        self._room = room
        self._packet = BufferReader(b"")
        self._left = 0  # bytes of the current packet amqtt has not read yet
        self._ended = False
        self.unfinished_qos2: set[int] = set()  # packet ids waiting for their PUBREL
        self.held_back = False  # waiting for room in the link's queue, not for the device

    async def read(self, n: int = -1) -> bytes:
        if self._left == 0 and not self._ended:
            await self._next_packet()
        if self._ended and self._left == 0:
            return b""  # amqtt's "no more data": the connection ends
        data: bytes = await self._packet.read(self._left if n < 0 else min(n, self._left))
        self._left -= len(data)
        return data

    def feed_eof(self) -> None:
        self._socket.feed_eof()

    async def _next_packet(self) -> None:
        self.held_back = True
        try:
            await self._room()  # the link's queue is full: read nothing more (flow control)
        finally:
            self.held_back = False
        try:
            header = await MQTTFixedHeader.from_stream(self._socket)
            if header is None:  # the device closed the socket
                self._ended = True
                return
            raw_header = header.to_bytes()
            self._check_header(header)
            body = await self._socket.read(header.remaining_length)
            await self._check_body(header, body)
        except PacketRuleBroken as broken:
            self._end(str(broken))
            return
        except MQTTError:  # amqtt's decoder: a remaining length past four bytes
            self._end(MALFORMED)
            return
        except (NoDataError, asyncio.IncompleteReadError, ConnectionError):
            self._ended = True
            return
        self._packet = BufferReader(raw_header + body)
        self._left = len(raw_header) + len(body)

    def _check_header(self, header: MQTTFixedHeader) -> None:
        if header.packet_type in (RESERVED_0, RESERVED_15):
            raise PacketRuleBroken(MALFORMED)
        if header.remaining_length > self._max_packet:
            raise PacketRuleBroken(TOO_LARGE)  # before a byte of its body is read

    async def _check_body(self, header: MQTTFixedHeader, body: bytes) -> None:
        if header.packet_type == PUBLISH:
            if (header.flags >> 1) & 0x03 == 0x03:  # QoS 3 does not exist
                raise PacketRuleBroken(MALFORMED)
            try:
                publish = await PublishVariableHeader.from_stream(BufferReader(body), header)
            except (MQTTError, NoDataError, UnicodeDecodeError, IndexError):
                raise PacketRuleBroken(MALFORMED) from None  # a wildcard, a short topic
            if (header.flags >> 1) & 0x03 == QOS_2 and publish.packet_id is not None:
                self.unfinished_qos2.add(publish.packet_id)
                if len(self.unfinished_qos2) > MAX_UNFINISHED_QOS2:
                    raise PacketRuleBroken(QOS2_HOARDING)
        elif header.packet_type == PUBREL:
            try:
                released = await PacketIdVariableHeader.from_stream(BufferReader(body), header)
            except (MQTTError, NoDataError, IndexError):
                raise PacketRuleBroken(MALFORMED) from None
            self.unfinished_qos2.discard(released.packet_id)

    def _end(self, reason: str) -> None:
        self._ended = True
        self._left = 0
        self._on_broken(reason)
        self._writer.transport.abort()  # nothing more is read or written on it
