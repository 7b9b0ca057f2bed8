"""Devices for the device link's tests: real MQTT clients (aiomqtt) on a real broker socket.

The link runs in the test's own event loop on the test's database, listening on a port
the kernel picks (kept bound, so no other test can take it). A "raw" device speaks MQTT
over a bare socket, with amqtt's own packet classes, for what a well-behaved client never
does: fall silent past its keep-alive, or vanish without closing its connection.
"""

from __future__ import annotations

import asyncio
import inspect
import socket
import sqlite3
import struct
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import aiomqtt
import asyncpg
import msgspec
from amqtt.adapters import StreamReaderAdapter
from amqtt.mqtt.connack import ConnackPacket
from amqtt.mqtt.connect import ConnectPacket, ConnectPayload, ConnectVariableHeader
from prometheus_client import REGISTRY
from sqlalchemy import Row, select
from sqlalchemy.engine import make_url

from devicecontrol.clock import utcnow
from devicecontrol.database.tables import controllers, readings
from devicecontrol.devices import identity, repository
from devicecontrol.devices.commands import service as commands
from devicecontrol.devices.link.compose import build_link
from devicecontrol.devices.link.core import DeviceLink
from devicecontrol.runtime import Runtime
from tests.factories import CLIENT_ID, CLIENT_SECRET, PASSWORD, make_controller, make_user
from tests.one_shot import ONE_SHOT
from tests.processes import Server

SECRET = "device-secret-0123456789abcdef"
DEADLINE_S = 5.0
OWNER = "ana@example.com"


async def provision(
    runtime: Runtime, serial: str, *, secret: str = SECRET, owner: str | None = None
) -> None:
    """A smart plug with a known device secret, owned by ``owner`` (a user made first)."""
    await make_controller(runtime, serial, owner=owner)
    async with runtime.database.write() as connection:
        await repository.set_device_secret(
            connection, serial, identity.device_secret_digest(secret), utcnow()
        )


async def make_owner(runtime: Runtime) -> None:
    await make_user(runtime, OWNER)


async def provision_owned(runtime: Runtime, serial: str) -> str:
    """OWNER (made here) and their smart plug ``serial``, with SECRET; the serial."""
    await make_owner(runtime)
    await provision(runtime, serial, owner=OWNER)
    return serial


async def owned(runtime: Runtime, serial: str) -> commands.OwnedDevice:
    async with runtime.database.read() as connection:
        row = (
            await connection.execute(
                select(controllers.c.user_id).where(controllers.c.serial_number == serial)
            )
        ).one()
    return await commands.owned_device(runtime, row.user_id, serial)


async def new_command(runtime: Runtime, serial: str, state: str = "on", *, ttl_s: int = 300) -> Row:
    device = await owned(runtime, serial)
    return await commands.create_command(
        runtime, device, name="switch_on_off", fields={"state": state}, ttl_s=ttl_s, strict=True
    )


async def command_status(runtime: Runtime, serial: str, command: Row) -> str:
    device = await owned(runtime, serial)
    return commands.shown(await commands.get_command(runtime, device, command.public_id))["status"]


@asynccontextmanager
async def writes_locked(database_url: str, *tables: str) -> AsyncIterator[None]:
    """No one else writes (SQLite: any table; PostgreSQL: ``tables``) while the block runs:
    an open write transaction of another connection, as a slow or stuck writer holds."""
    url = make_url(database_url)
    if url.get_backend_name() == "sqlite":
        connection = sqlite3.connect(url.database or "", isolation_level=None)
        connection.execute("BEGIN IMMEDIATE")
        try:
            yield
        finally:
            connection.execute("ROLLBACK")
            connection.close()
        return
    dsn = url.set(drivername="postgresql").render_as_string(hide_password=False)
    holder = await asyncpg.connect(dsn)
    try:
        async with holder.transaction():
            await holder.execute(f"LOCK TABLE {', '.join(tables)} IN EXCLUSIVE MODE")
            yield
    finally:
        await holder.close()


@asynccontextmanager
async def running_link(runtime: Runtime) -> AsyncIterator[DeviceLink]:
    link = build_link(runtime, listen="127.0.0.1:0")
    await link.start()
    try:
        yield link
    finally:
        await link.stop()


def device(link: DeviceLink, serial: str, secret: str = SECRET, **options: Any) -> aiomqtt.Client:
    options.setdefault("identifier", serial)
    return aiomqtt.Client(
        "127.0.0.1", link.port, username=serial, password=secret, timeout=DEADLINE_S, **options
    )


async def eventually(
    check: Callable[[], Any | Awaitable[Any]], *, within: float = DEADLINE_S, what: str = ""
) -> Any:
    """Poll ``check`` every 20 ms until it is truthy; fail after ``within`` seconds."""
    deadline = time.monotonic() + within
    while True:
        result = check()
        if inspect.isawaitable(result):
            result = await result
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {within} s: {what or check}")
        await asyncio.sleep(0.02)


async def controller(runtime: Runtime, serial: str) -> Row:
    async with runtime.database.read() as connection:
        query = select(controllers.c.id, controllers.c.online, controllers.c.last_seen).where(
            controllers.c.serial_number == serial
        )
        return (await connection.execute(query)).one()


async def is_online(runtime: Runtime, serial: str) -> bool:
    return bool((await controller(runtime, serial)).online)


async def is_offline(runtime: Runtime, serial: str) -> bool:
    return not await is_online(runtime, serial)


async def stored_readings(runtime: Runtime, serial: str) -> list[dict[str, Any]]:
    """The device's readings as stored, oldest first."""
    controller_id = (await controller(runtime, serial)).id
    async with runtime.database.read() as connection:
        query = (
            select(readings.c.payload)
            .where(readings.c.controller_id == controller_id)
            .order_by(readings.c.id)
        )
        return [msgspec.json.decode(row.payload) for row in await connection.execute(query)]


async def next_command(client: aiomqtt.Client, *, within: float = DEADLINE_S) -> dict[str, Any]:
    async with asyncio.timeout(within):
        async for message in client.messages:
            return msgspec.json.decode(message.payload)
    raise AssertionError("the connection ended")


async def nothing_arrives(client: aiomqtt.Client, *, within: float = 0.5) -> None:
    """No message for ``within`` seconds (longer than a few of the link's polls)."""
    try:
        async with asyncio.timeout(within):
            async for message in client.messages:
                raise AssertionError(f"unexpected message on {message.topic}: {message.payload!r}")
    except TimeoutError:
        return


async def connection_ends(client: aiomqtt.Client, *, within: float) -> None:
    """The broker closes the client's connection within ``within`` seconds."""
    try:
        async with asyncio.timeout(within):
            async for _ in client.messages:
                pass
    except aiomqtt.MqttError:
        return
    raise AssertionError("the connection did not end")


def forget_dropped_connection(client: aiomqtt.Client) -> None:
    """aiomqtt keeps the error of a connection the broker dropped in a future that nobody
    awaits once the client is left (aiomqtt 2.x); asyncio logs it as never retrieved when
    it is collected, in whichever test runs then, where it looks like that test's error."""
    disconnected = client._disconnected
    if disconnected.done() and not disconnected.cancelled():
        disconnected.exception()


def metric(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


class RawDevice:
    """An MQTT connection over a bare socket (amqtt's packet classes, nothing by hand)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def connect(
        cls,
        port: int,
        serial: str,
        secret: str = SECRET,
        *,
        keep_alive: int = 60,
        from_address: str | None = None,
    ) -> tuple[RawDevice, int]:
        """The device and its CONNACK's return code; ``from_address`` is the loopback
        address it connects from (127.0.0.2, ...: another client address)."""
        local = (from_address, 0) if from_address else None
        reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=local)
        header = ConnectVariableHeader(keep_alive=keep_alive)
        header.clean_session_flag = header.username_flag = header.password_flag = True
        payload = ConnectPayload(client_id=serial, username=serial, password=secret)
        writer.write(ConnectPacket(variable_header=header, payload=payload).to_bytes())
        async with asyncio.timeout(DEADLINE_S):
            connack = await ConnackPacket.from_stream(StreamReaderAdapter(reader))
        return cls(reader, writer), connack.return_code

    def kill(self) -> None:
        """Vanish: the socket is reset, with no DISCONNECT and no orderly close."""
        sock = self.writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.writer.transport.abort()

    async def closed_by_broker(self, *, within: float) -> bool:
        """The broker ends the connection within ``within`` seconds: closed, or reset (an
        abort, for a device that broke a limit); a byte it sends instead is False."""
        async with asyncio.timeout(within):
            try:
                return await self.reader.read(1) == b""
            except ConnectionResetError:
                return True


def served_token(server: Server, owner: str) -> str:
    """A fresh access token of ``owner`` (the factories' app and password), from ``serve``."""
    form = {"client_id": CLIENT_ID, "client_secret": CLIENT_SECRET,
            "username": owner, "password": PASSWORD}  # fmt: skip
    response = ONE_SHOT.post(f"{server.base_url}/v1/auth/login", json=form, timeout=10)
    assert response.status_code == 200, response.text
    return str(response.json()["auth"]["access_token"])


def switch_command(server: Server, token: str, serial: str, state: str) -> str:
    """POST /v1/controllers/<serial>/commands, a plug's switch_on_off, on a connection of
    its own (any worker's); the new command's id."""
    response = ONE_SHOT.post(
        f"{server.base_url}/v1/controllers/{serial}/commands",
        json={"name": "switch_on_off", "params": {"state": state}},
        headers={"Authorization": f"Bearer {token}"},
        timeout=10,
    )
    assert response.status_code == 201, response.text
    return str(response.json()["command"]["id"])


def served_command_status(server: Server, token: str, serial: str, command_id: str) -> str:
    """GET /v1/controllers/<serial>/commands/<id>: the command's status."""
    response = ONE_SHOT.get(
        f"{server.base_url}/v1/controllers/{serial}/commands/{command_id}",
        headers={"Authorization": f"Bearer {token}"},
        timeout=10,
    )
    assert response.status_code == 200, response.text
    return str(response.json()["command"]["status"])
