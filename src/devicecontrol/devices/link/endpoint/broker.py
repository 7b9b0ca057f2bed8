"""The device endpoint: the service's own MQTT 3.1.1 server for devices (contract §9), a
``ports.Broker`` that is not a general broker.

Devices never talk to each other: each CONNECTs, PUBLISHes to its own ``state`` and
``commands/result`` topics (QoS 0, 1 or 2), SUBSCRIBEs to its own ``commands``, PINGs and
DISCONNECTs. So there is no routing, no retained message, no will and no queue per
session: a connection is a socket, one task reading it, and a few fields (what amqtt
holds in a state machine, several queues and events per session, 40 KB and more). The
packets are amqtt's codec (``packets.py``); the rules are the link's (``ports.ProvingLink``).

- **CONNECT first, proved first.** Nothing but a CONNECT within ``CONNECT_TIMEOUT_S`` is
  read; a refused one gets CONNACK 5 and touches nothing, not even a live connection of
  the same device. A proved one takes over the device's previous connection.
- **Acknowledged after commit.** A QoS 1 PUBLISH is PUBACKed (and a QoS 2 one PUBCOMPed)
  once the link has stored it, in the order the PUBLISHes came; meanwhile the socket is
  read on. While the link's queue is full nothing is read: TCP holds the device back.
- **At most as many connections as the process has files for** (``file_limit.py``): one
  past them is closed at once, counted and logged once per episode.
- **Keep-alive.** What the device asked, unless 0 or above the maximum; 1.5 times that
  without a packet closes the connection (not while the link holds the device back).
- **Persistent sessions** keep one thing, whether the device subscribed to its commands:
  a resumed one is subscribed again (CONNACK session present), and the outbox delivers
  what is deliverable. Commands themselves are never queued here: one published while the
  device is away stays ``sent``, and goes again at its next subscription (at least once).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import ssl
from dataclasses import dataclass, field

from amqtt.mqtt.connack import ConnackPacket
from amqtt.mqtt.pingresp import PingRespPacket
from amqtt.mqtt.puback import PubackPacket
from amqtt.mqtt.pubcomp import PubcompPacket
from amqtt.mqtt.publish import PublishPacket
from amqtt.mqtt.pubrec import PubrecPacket
from amqtt.mqtt.suback import SubackPacket
from amqtt.mqtt.unsuback import UnsubackPacket

from devicecontrol.config import Settings
from devicecontrol.devices import topics
from devicecontrol.devices.link.acks import InOrderAcknowledgements
from devicecontrol.devices.link.endpoint import packets
from devicecontrol.devices.link.endpoint.file_limit import (
    ConnectionGate,
    device_capacity,
    raise_soft_limit,
)
from devicecontrol.devices.link.endpoint.packets import BrokenRule, Packet, PacketRuleBroken
from devicecontrol.devices.link.listener import granted_keep_alive, listening_socket, tls_context
from devicecontrol.devices.link.ports import DeviceConnection, ProvingLink
from devicecontrol.devices.topics import MessageKind

CONNECT_TIMEOUT_S = 10  # a socket that never sends its CONNECT is closed after this long
TAKE_OVER_WAIT_S = 1.0  # a take-over waits this long for the old connection to end
MAX_UNFINISHED_QOS2 = 10  # incoming QoS 2 messages waiting for their PUBREL, per connection
PERSISTENT_SESSION_EXPIRY_S = 86400.0  # a persistent session gone this long is forgotten
SUBACK_FAILURE = 0x80
CONNACK_ACCEPTED, CONNACK_BAD_PROTOCOL, CONNACK_NOT_AUTHORIZED = 0, 1, 5
MQTT_3_1_1 = 4
DUP = 0x08  # the fixed header's flag of a PUBLISH sent again
logger = logging.getLogger("devicecontrol.devices.link")


@dataclass(eq=False, slots=True)
class _Session:
    """One proved connection of a device."""

    connection: DeviceConnection
    writer: asyncio.StreamWriter
    silence_s: int  # without a packet this long, the connection is dead (1.5 x keep-alive)
    next_packet_id: int = 0
    unfinished_qos2: dict[int, tuple[MessageKind, bytes]] = field(default_factory=dict)
    # PUBACKs and PUBCOMPs, in PUBLISH order, each once its message is stored
    acks: InOrderAcknowledgements[bytes] = field(init=False)

    def __post_init__(self) -> None:
        self.acks = InOrderAcknowledgements(self.send)

    def send(self, packet: bytes) -> None:
        if not self.writer.is_closing():
            self.writer.write(packet)

    def packet_id(self) -> int:
        self.next_packet_id = self.next_packet_id % 65535 + 1
        return self.next_packet_id


class DeviceEndpoint:
    """The link's own listener for devices (contract §9); a ``ports.Broker``."""

    devices_outlive_link = False
    checks_secrets = False  # the link closes a rotated secret's connection
    coordinates = True
    reports_every_connection = True  # it is the broker: it sees every connection
    session_expiry_s: float | None = PERSISTENT_SESSION_EXPIRY_S

    def __init__(self, link: ProvingLink, listen: str, settings: Settings) -> None:
        self.link = link
        self.listen = listen
        self.settings = settings
        self.where = {"listen": listen}
        self._server: asyncio.Server | None = None
        self._port: int | None = None
        self._sessions: dict[DeviceConnection, _Session] = {}
        self._by_serial: dict[str, _Session] = {}
        self._serving: set[asyncio.Task[None]] = set()
        self._gate = ConnectionGate(device_capacity(raise_soft_limit()))

    @property
    def port(self) -> int | None:
        return self._port

    @property
    def ready(self) -> bool:
        return self._server is not None

    async def start(self) -> None:
        listener = listening_socket(self.listen)
        self._port = int(listener.getsockname()[1])
        try:
            context = None
            if self.settings.mqtt_tls_cert and self.settings.mqtt_tls_key:
                context = tls_context(self.settings.mqtt_tls_cert, self.settings.mqtt_tls_key)
            await self.link.reset_online()
            self._gate.watch_accept_failures(asyncio.get_running_loop())
            self._server = await asyncio.start_server(self._serve, sock=listener, ssl=context)
        except BaseException:
            listener.close()
            raise

    async def shutdown(self) -> None:
        """Stop listening and close every device connection (each ends as usual)."""
        if self._server is None:
            return
        self._server.close()
        for session in list(self._sessions.values()):
            session.writer.close()
        for serving in list(self._serving):
            serving.cancel()
        await asyncio.gather(*self._serving, return_exceptions=True)
        self._server = None

    async def publish(self, topic: str, payload: bytes) -> None:
        """A command, at QoS 1, to the device whose commands topic it is, if connected."""
        session = self._by_serial.get(topics.commanded_device(topic) or "")
        if session is None or not session.connection.subscribed:
            return  # it stays sent, and goes again at the next subscription
        packet = PublishPacket.build(topic, payload, session.packet_id(), False, 1, False)
        session.send(packet.to_bytes())

    async def close_connection(self, connection: DeviceConnection) -> None:
        session = self._sessions.get(connection)
        if session is not None:
            session.writer.close()

    # --- one connection -------------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not self._gate.admit():  # at the open files limit (file_limit.py)
            writer.transport.abort()
            return
        task = asyncio.current_task()
        assert task is not None
        self._serving.add(task)
        peer = writer.get_extra_info("peername") or ("", 0)
        address = str(peer[0])
        session: _Session | None = None
        try:
            session = await self._accept(reader, writer, address)
            if session is not None:
                await self._converse(session, reader)
        except PacketRuleBroken as broken:
            self.link.connection_refused(broken.rule, address)
        except (ConnectionError, asyncio.IncompleteReadError, TimeoutError, ssl.SSLError):
            pass
        except asyncio.CancelledError:
            pass
        finally:
            writer.transport.abort()
            self._gate.release()
            if session is not None:
                self._ended(session)
            self._serving.discard(task)

    async def _accept(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, address: str
    ) -> _Session | None:
        """Read the CONNECT, prove the device, then let it in (the module's docstring)."""
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT_S):
                first = await packets.read_packet(reader, max_packet=self.settings.mqtt_max_packet)
            if first is None or first.kind != packets.CONNECT:
                raise PacketRuleBroken(BrokenRule.NO_CONNECT)
            connect = await first.connect()
        except PacketRuleBroken as broken:
            if broken.rule is not BrokenRule.TOO_LARGE:
                broken = PacketRuleBroken(BrokenRule.NO_CONNECT)  # garbage, or not a CONNECT
            raise broken from None
        except (TimeoutError, asyncio.IncompleteReadError, ConnectionError):
            self.link.connection_refused(BrokenRule.NO_CONNECT, address)
            return None
        if connect.proto_level != MQTT_3_1_1 or connect.proto_name != "MQTT":
            writer.write(ConnackPacket.build(0, CONNACK_BAD_PROTOCOL).to_bytes())
            return None
        payload = connect.payload
        identity = await self.link.authenticate(
            client_id=payload.client_id,
            username=payload.username,
            password=payload.password,
            address=address,
        )
        if identity is None:
            writer.write(ConnackPacket.build(0, CONNACK_NOT_AUTHORIZED).to_bytes())
            with contextlib.suppress(ConnectionError):
                await writer.drain()
            return None
        connection, previous = self.link.claim(identity, address)
        if previous is not None:  # MQTT: a new connection with a client id in use ends the old
            await self.close_connection(previous)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(previous.wait_ended(), TAKE_OVER_WAIT_S)
        keep_alive = granted_keep_alive(connect.keep_alive, self.settings.mqtt_max_keepalive_s)
        session = _Session(connection, writer, silence_s=math.ceil(keep_alive * 1.5))
        self._sessions[connection] = session
        self._by_serial[identity.serial_number] = session
        # what begin queues (a resumed session's deliveries) runs after this CONNACK
        resumed = self.link.begin(connection, clean=bool(connect.clean_session_flag))
        session.send(ConnackPacket.build(int(resumed.present), CONNACK_ACCEPTED).to_bytes())
        return session

    async def _converse(self, session: _Session, reader: asyncio.StreamReader) -> None:
        silence_s = session.silence_s
        serial = session.connection.identity.serial_number
        max_packet = self.settings.mqtt_max_packet
        while True:
            await self.link.room()  # the link's queue is full: read nothing (flow control)
            async with asyncio.timeout(silence_s):
                packet = await packets.read_packet(reader, max_packet=max_packet)
            if packet is None or packet.kind == packets.DISCONNECT:
                return
            await self._handle(session, serial, packet)

    async def _handle(self, session: _Session, serial: str, packet: Packet) -> None:
        kind = packet.kind
        if kind == packets.PUBLISH:
            await self._publication(session, serial, packet)
        elif kind == packets.PUBREL:
            packet_id = await packet.packet_id()
            released = session.unfinished_qos2.pop(packet_id, None)
            stored = None
            if released is not None:
                stored = self.link.publication(serial, *released)
            session.acks.when_stored(stored, PubcompPacket.build(packet_id).to_bytes())
        elif kind == packets.SUBSCRIBE:
            await self._subscribe(session, serial, packet)
        elif kind == packets.UNSUBSCRIBE:
            unsubscribe = await packet.unsubscribe()
            session.send(UnsubackPacket.build(unsubscribe.variable_header.packet_id).to_bytes())
            for topic in unsubscribe.payload.topics:
                self.link.unsubscribed(serial, topic)
        elif kind == packets.PINGREQ:
            session.send(PingRespPacket.build().to_bytes())
        elif kind == packets.PUBACK:
            await packet.packet_id()  # a command arrived; the device's result says more
        else:  # a second CONNECT
            raise PacketRuleBroken(BrokenRule.MALFORMED)

    async def _publication(self, session: _Session, serial: str, packet: Packet) -> None:
        publish = await packet.publish()
        topic, data = publish.topic_name, bytes(publish.data or b"")
        qos, packet_id = packet.qos, publish.packet_id
        kind = self.link.publication_kind(serial, topic)  # None: dropped; acknowledged alike
        if qos == 0:
            if kind is not None:
                self.link.publication(serial, kind, data)
        elif qos == 1:
            assert packet_id is not None
            stored = None
            if kind is not None:
                redelivery = bool(packet.flags & DUP)
                stored = self.link.publication(serial, kind, data, redelivery=redelivery)
            session.acks.when_stored(stored, PubackPacket.build(packet_id).to_bytes())
        else:  # QoS 2: kept until its PUBREL, a bounded number of them
            assert packet_id is not None
            if kind is not None and packet_id not in session.unfinished_qos2:
                if len(session.unfinished_qos2) >= MAX_UNFINISHED_QOS2:
                    raise PacketRuleBroken(BrokenRule.QOS2_HOARDING)
                session.unfinished_qos2[packet_id] = (kind, data)
            session.send(PubrecPacket.build(packet_id).to_bytes())

    async def _subscribe(self, session: _Session, serial: str, packet: Packet) -> None:
        subscribe = await packet.subscribe()
        requested = subscribe.payload.topics
        if any(qos > 2 for _, qos in requested):
            raise PacketRuleBroken(BrokenRule.MALFORMED)
        granted: list[int] = []
        for topic, qos in requested:  # the link's subscribe filter decides each
            if self.link.subscribed(serial, topic):
                granted.append(min(qos, 1))
            else:
                granted.append(SUBACK_FAILURE)
        session.send(SubackPacket.build(subscribe.variable_header.packet_id, granted).to_bytes())

    def _ended(self, session: _Session) -> None:
        connection = session.connection
        self._sessions.pop(connection, None)
        serial = connection.identity.serial_number
        if self._by_serial.get(serial) is session:
            del self._by_serial[serial]
        self.link.connection_ended(connection)
