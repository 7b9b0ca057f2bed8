"""The embedded MQTT broker: amqtt's, with a device's CONNECT proved before anything else.

amqtt 0.12.1 handles a CONNECT in an order that lets a stranger harm a device: for a clean
session with a known client id it deletes the stored session (the live device's
subscriptions) before it authenticates, and it takes over a connected session before it
looks at the result of authentication. A CONNECT with a device's serial and a wrong
secret would wipe or kick the live device. ``DeviceBroker`` authenticates first; a refused
CONNECT gets CONNACK "not authorized" and touches nothing. Only then does the MQTT take-over
happen (the old connection is closed, as MQTT requires and amqtt did only for persistent
sessions) and amqtt's own choice of session follow.

Other departures from amqtt, each for a rule of contract §9: keep-alive expiry ends the
connection (amqtt only logged it); device publications are neither broadcast nor retained
(no client may receive them; a retained payload would be memory a device fills at will); a
device's will is dropped (it would bypass the topic rules); the listening socket is bound
by the link beforehand, so that a taken port is a clean one-line error.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import socket
import ssl
from collections.abc import Callable
from functools import partial
from typing import Any

from amqtt.adapters import ReaderAdapter, StreamWriterAdapter, WriterAdapter
from amqtt.broker import Broker, Server
from amqtt.contexts import BrokerConfig, ListenerType
from amqtt.errors import MQTTError
from amqtt.mqtt.protocol.broker_handler import BrokerProtocolHandler
from amqtt.mqtt.puback import PubackPacket
from amqtt.session import INCOMING, Session

from devicecontrol.config import Settings
from devicecontrol.devices.link.embedded.packet_guard import PacketGuard
from devicecontrol.devices.link.embedded.plugins import CONNECTION, IDENTITY
from devicecontrol.devices.link.listener import granted_keep_alive, listening_socket, tls_context
from devicecontrol.devices.link.ports import DeviceConnection, Link, Stored

PLUGINS = "devicecontrol.devices.link.embedded.plugins"
# a socket that never sends its CONNECT is closed after this long
CONNECT_TIMEOUT_S = 10
# how long a take-over waits for the old connection to end before amqtt's session logic
TAKE_OVER_WAIT_S = 1.0
REFUSED = "device refused"
NO_CONNECT = "no valid CONNECT"
PERSISTENT_SESSION_EXPIRY_S = 86400


def broker_config(link: Link, listen: str) -> BrokerConfig:
    """Our three plugins only: amqtt's defaults include anonymous access and a packet
    logger that would write CONNECT packets, passwords included, at debug level."""
    return BrokerConfig.from_dict(
        {
            "listeners": {"default": {"type": "tcp", "bind": listen}},
            # a persistent session whose device has been gone this long is forgotten
            "session_expiry_interval": PERSISTENT_SESSION_EXPIRY_S,
            "plugins": {
                f"{PLUGINS}.DeviceAuthPlugin": {"link": link},
                f"{PLUGINS}.DeviceTopicPlugin": {"link": link},
                f"{PLUGINS}.DeviceEventsPlugin": {"link": link},
            },
        }
    )


class _RefusalsAreAudited(logging.Filter):
    """amqtt logs every refused CONNECT as a warning, and every socket that never sent a
    valid one: the audit line records the first, the link's rate-limited log the second."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return REFUSED not in message and NO_CONNECT not in message


class DeviceProtocolHandler(BrokerProtocolHandler):
    """amqtt's handler, ending the connection when the keep-alive expires (MQTT 3.1.2.10),
    and handing a device's QoS 0 and 1 messages to the link itself: a QoS 1 message is
    acknowledged once the link has stored it, not as it arrives (contract §9, Readings).
    QoS 2 keeps amqtt's flow (PUBREC at once), and reaches the link through the plugins.
    """

    _expiry: asyncio.Task[None] | None = None
    # the link's ``publication``, set once the CONNECT is proved
    take_publication: Callable[..., Stored | None] | None = None

    def handle_read_timeout(self) -> None:
        if getattr(self.reader, "held_back", False):
            return  # the link holds the device back (flow control): not its silence
        if self._expiry is None:
            self._expiry = asyncio.ensure_future(self.handle_connection_closed())

    async def _handle_qos0_message_flow(self, app_message: Any) -> None:
        if app_message.direction != INCOMING or self.take_publication is None:
            await super()._handle_qos0_message_flow(app_message)
            return
        self._hand_over(app_message)  # best effort: nothing waits for it

    async def _handle_qos1_message_flow(self, app_message: Any) -> None:
        if app_message.direction != INCOMING or self.take_publication is None:
            await super()._handle_qos1_message_flow(app_message)
            return
        stored = self._hand_over(app_message)
        if stored is not None:
            await stored  # committed to the database: only now is it acknowledged
        puback = PubackPacket.build(app_message.packet_id)
        await self._send_packet(puback)
        app_message.puback_packet = puback

    def _hand_over(self, app_message: Any) -> Stored | None:
        assert self.take_publication is not None and self.session is not None
        identity = self.session.attributes[IDENTITY]
        packet = app_message.publish_packet
        return self.take_publication(
            identity.serial_number,
            app_message.topic,
            bytes(app_message.data),
            redelivery=bool(packet is not None and packet.dup_flag),
        )


class DeviceBroker(Broker):
    def __init__(
        self,
        link: Link,
        settings: Settings,
        listener: socket.socket,
        ssl_context: ssl.SSLContext | None,
    ) -> None:
        self.link = link
        self.settings = settings
        self._handlers: dict[DeviceConnection, BrokerProtocolHandler] = {}
        self._listener = listener
        self._ssl_context = ssl_context
        address, port = listener.getsockname()[:2]
        super().__init__(broker_config(link, f"{address}:{port}"))
        if not any(isinstance(f, _RefusalsAreAudited) for f in self.logger.filters):
            self.logger.addFilter(_RefusalsAreAudited())

    async def stream_connected(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, listener_name: str
    ) -> None:
        """amqtt reads a device's bytes through a ``PacketGuard``: whole, checked packets."""
        peer = writer.get_extra_info("peername") or ("", 0)
        guard = PacketGuard(
            reader,
            writer,
            max_packet=self.settings.mqtt_max_packet,
            on_broken=partial(self.link.connection_refused, address=str(peer[0])),
            room=self.link.room,
        )
        await self._client_connected(listener_name, guard, StreamWriterAdapter(writer))

    async def _create_server_instance(
        self,
        listener_name: str,
        listener_type: ListenerType,
        address: str | None,
        port: int,
        ssl_context: ssl.SSLContext | None,
    ) -> asyncio.Server:
        """Serve on the socket the link bound (and with its TLS), not on a new one."""
        callback = partial(self.stream_connected, listener_name=listener_name)
        return await asyncio.start_server(callback, sock=self._listener, ssl=self._ssl_context)

    async def _initialize_client_session(
        self, reader: ReaderAdapter, writer: WriterAdapter, remote_address: str, remote_port: int
    ) -> tuple[BrokerProtocolHandler, Session]:
        """Read the CONNECT, prove the device, then let it in (see the module's docstring)."""
        try:
            handler, incoming = await asyncio.wait_for(
                DeviceProtocolHandler.init_from_connect(reader, writer, self.plugins_manager),
                CONNECT_TIMEOUT_S,
            )
        except Exception as exc:  # garbage, a timeout, a half packet
            with contextlib.suppress(OSError):
                await writer.close()
            self.link.connection_refused("no_connect", remote_address)
            raise MQTTError(f"{NO_CONNECT} from {remote_address}: {exc!r}") from None
        if not await self._authenticate(incoming, self.listeners_config["default"]):
            with contextlib.suppress(OSError):  # the device may be gone already
                handler.attach(incoming, reader, writer)
                await handler.mqtt_connack_authorize(False)  # return code 5, not authorized
                await writer.close()
            raise MQTTError(f"{REFUSED} from {remote_address}")
        identity = incoming.attributes[IDENTITY]
        connection, previous = self.link.claim(identity, remote_address)
        try:
            if previous is not None:
                await self._take_over(previous)
            session = await self._session_for(incoming)
        except BaseException:
            self.link.connection_ended(connection)
            raise
        session.attributes[IDENTITY], session.attributes[CONNECTION] = identity, connection
        handler.take_publication = self.link.publication
        session.will_flag, session.password = False, None  # the secret is not kept
        maximum = self.settings.mqtt_max_keepalive_s
        granted = granted_keep_alive(incoming.keep_alive, maximum)
        session.keep_alive = math.ceil(granted * 1.5)  # MQTT's grace
        return handler, session

    async def _take_over(self, previous: DeviceConnection) -> None:
        """MQTT's rule: a new connection with a client id in use ends the old one."""
        await self.close_connection(previous)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(previous.ended.wait(), TAKE_OVER_WAIT_S)

    async def _session_for(self, incoming: Session) -> Session:
        """amqtt's choice of session: a clean one replaces what is stored; otherwise a
        stored persistent session resumes, with this connection's parameters."""
        client_id = incoming.client_id or ""
        stored = self._sessions.get(client_id, (None, None))[0]
        if incoming.clean_session or stored is None or stored.clean_session:
            await self._delete_session(client_id)
            incoming.parent = 0
            return incoming
        stored.keep_alive, stored.username = incoming.keep_alive, incoming.username
        stored.parent = 1
        return stored

    async def _handle_client_session(
        self,
        reader: ReaderAdapter,
        writer: WriterAdapter,
        client_session: Session,
        handler: BrokerProtocolHandler,
        server: Server,
        listener_name: str,
    ) -> None:
        """amqtt's handling of a connection, bracketed by the link's online and offline."""
        connection: DeviceConnection = client_session.attributes[CONNECTION]
        self._handlers[connection] = handler
        self.link.connection_started(connection)
        try:
            await super()._handle_client_session(
                reader, writer, client_session, handler, server, listener_name
            )
        finally:
            client_session.inflight_in.clear()  # unfinished QoS 2: nothing outlives it
            self._handlers.pop(connection, None)
            self.link.connection_ended(connection)

    async def close_connection(self, connection: DeviceConnection) -> None:
        """End one connection as amqtt's own take-over does; its session ends as usual."""
        handler = self._handlers.get(connection)
        if handler is not None:
            await handler.handle_connection_closed()
            await handler.stop()

    async def _broadcast_message(
        self,
        session: Session | None,
        topic: str | None,
        data: bytes | bytearray | None,
        force_qos: int | None = None,
    ) -> None:
        """Only the service's own messages (commands) go out; no client may receive a
        device's publication, so matching it against every subscription is waste."""
        if session is None:
            await super()._broadcast_message(session, topic, data, force_qos)

    async def retain_message(self, *_: Any, **__: Any) -> None:
        """Retained messages are not kept (the service sends none; devices need none)."""


class EmbeddedBroker:
    """The link's own broker, the default (contract §9): amqtt on ``listen``, the devices'
    TLS when the settings name a certificate; a ``ports.Broker``."""

    devices_outlive_link = False
    checks_secrets = False  # amqtt asks the link; the link closes a rotated secret's connection

    def __init__(self, link: Link, listen: str, settings: Settings) -> None:
        self.link = link
        self.listen = listen
        self.settings = settings
        self.where = {"listen": listen}
        self._broker: DeviceBroker | None = None
        self._port: int | None = None

    @property
    def port(self) -> int | None:
        """The port it listens on (the kernel's pick when ``listen`` names port 0)."""
        return self._port

    @property
    def ready(self) -> bool:
        return self._broker is not None

    async def start(self) -> None:
        """Listen for devices (``LinkError`` if that cannot be), everyone offline first."""
        settings = self.settings
        listener = listening_socket(self.listen)
        self._port = int(listener.getsockname()[1])
        try:
            context = None
            if settings.mqtt_tls_cert and settings.mqtt_tls_key:
                context = tls_context(settings.mqtt_tls_cert, settings.mqtt_tls_key)
            await self.link.reset_online()
            self._broker = DeviceBroker(self.link, settings, listener, context)
            await self._broker.start()
        except BaseException:
            listener.close()
            raise

    async def shutdown(self) -> None:
        """Close every device connection (each then ends as usual, in the link too)."""
        if self._broker is not None:
            await self._broker.shutdown()

    async def publish(self, topic: str, payload: bytes) -> None:
        assert self._broker is not None
        await self._broker.internal_message_broadcast(topic, payload, qos=1)

    async def close_connection(self, connection: DeviceConnection) -> None:
        if self._broker is not None:
            await self._broker.close_connection(connection)
