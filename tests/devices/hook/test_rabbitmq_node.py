"""The broker hook and the device link behind a real two-node RabbitMQ cluster (its MQTT
plugin, HTTP auth backend, event exchange and management API), with real ``serve``
processes: devices as real MQTT clients on either node are let in, kept to their own
topics and refused after a rotation by the cluster itself, through the hook, and a
connection made with the rotated secret is ended through the management API; one device
connects over TLS; the service's own account publishes a command on one node that reaches
a device on the other. Then a ``serve`` whose link reads the cluster over AMQP with TLS
stores a device's reading, follows its ``online``, and delivers a command whose result
comes back, and two links share the devices' messages. One cluster for the whole test:
each node takes about 10 s to start.
"""

from __future__ import annotations

import asyncio
import ssl
from typing import Any

import aiomqtt
import httpx
import msgspec
from sqlalchemy import func, select

from devicecontrol.config import Settings
from devicecontrol.database.tables import controllers, readings
from devicecontrol.devices.identity import rotate_device_secret
from devicecontrol.runtime import Runtime
from tests.conftest import POSTGRESQL_ONLY
from tests.devices.link.support import (
    OWNER,
    connection_ends,
    eventually,
    is_online,
    served_command_status,
    served_token,
    switch_command,
)
from tests.factories import make_client, make_controller, make_user
from tests.one_shot import ONE_SHOT
from tests.processes import Server, free_port, running_server
from tests.rabbitmq import RabbitNode, private_rabbitmq_cluster
from tests.tls import ServerCertificate, server_certificate

TOKEN = "hook-token-of-the-rabbitmq-test-0123456789"
SECRET, OTHER_SECRET = "plug-one-secret-rabbit", "plug-two-secret-rabbit"
LINK_USER, LINK_PASSWORD = "devicecontrol-link", "link-password-of-the-rabbitmq-test"
WAIT_S = 10


def client(port: int, name: str, secret: str, **options) -> aiomqtt.Client:
    options.setdefault("identifier", name)
    return aiomqtt.Client(
        "127.0.0.1",
        port,
        username=name,
        password=secret,
        protocol=aiomqtt.ProtocolVersion.V311,
        timeout=WAIT_S,
        **options,
    )


def fetch(server: Server, bearer: str) -> dict:
    """POST /v1/provider/fetch of PLUG-2: its latest reading and ``online``."""
    answer = ONE_SHOT.post(
        f"{server.base_url}/v1/provider/fetch",
        json={"serial_number": "PLUG-2"},
        headers={"Authorization": f"Bearer {bearer}"},
        timeout=10,
    )
    assert answer.status_code == 200, answer.text
    return answer.json()["provider"]


async def refused(port: int, serial: str, secret: str) -> bool:
    try:
        async with client(port, serial, secret):
            return False
    except aiomqtt.MqttError:
        return True


async def closed_by_the_broker(plug: aiomqtt.Client) -> bool:
    """Whether the broker closes this connection within WAIT_S (a QoS 0 publication of the
    device's own fails at once once it has)."""
    for _ in range(WAIT_S * 10):
        await asyncio.sleep(0.1)
        try:
            await plug.publish("devices/PLUG-1/state", b"{}", qos=0)
        except aiomqtt.MqttError:
            return True
    return False


@POSTGRESQL_ONLY
async def test_a_rabbitmq_cluster_lets_devices_in_and_keeps_them_to_their_topics_via_the_hook(
    settings: Settings, tmp_path
):
    runtime = Runtime.from_settings(settings)
    certificate = server_certificate(tmp_path / "tls")
    try:
        await make_client(runtime)
        await make_user(runtime, OWNER)
        await make_controller(runtime, "PLUG-1", device_secret=SECRET)
        await make_controller(runtime, "PLUG-2", device_secret=OTHER_SECRET, owner=OWNER)
        hook_port = free_port()
        hook = f"http://127.0.0.1:{hook_port}"
        with private_rabbitmq_cluster(hook, TOKEN, tls=certificate) as (first, second):
            assert first.mqtts_port is not None
            # one serve with the hook and the link: the hook starts first, since the link
            # logs in to RabbitMQ through it
            # shard 0 over TLS, ending rotated secrets' connections through the
            # management API
            env = {
                "DEVICECONTROL_BROKER_HOOK_LISTEN": f"127.0.0.1:{hook_port}",
                "DEVICECONTROL_BROKER_HOOK_TOKEN": TOKEN,
                "DEVICECONTROL_AMQP_URL": (
                    f"amqps://{LINK_USER}:{LINK_PASSWORD}@127.0.0.1:{first.amqps_port}/"
                ),
                "DEVICECONTROL_MQTT_CA": str(certificate.ca),
                "DEVICECONTROL_RABBITMQ_MANAGEMENT_URL": (
                    f"http://127.0.0.1:{first.management_port}"
                ),
                "DEVICECONTROL_LINK_SHARD": "0/2",
            }
            # the second link process stores the other shard of the devices' messages
            sharer = {
                "DEVICECONTROL_AMQP_URL": (
                    f"amqp://{LINK_USER}:{LINK_PASSWORD}@127.0.0.1:{first.amqp_port}/"
                ),
                "DEVICECONTROL_LINK_SHARD": "1/2",
            }
            (tmp_path / "sharer").mkdir()
            with (
                running_server(
                    settings.database_url, tmp_path, env=env, device_link=True
                ) as server,
                running_server(
                    settings.database_url, tmp_path / "sharer", env=sharer, device_link=True
                ) as other_link,
            ):
                await _the_hook_answers_for_the_cluster(
                    runtime, server, hook, (first, second), certificate
                )
                await _the_link_reads_the_cluster(server, second)
                await _two_links_share_the_messages(runtime, (server, other_link), first)
            for served in (server, other_link):
                assert "Traceback" not in served.stderr(), served.stderr()
    finally:
        await runtime.close()


async def _the_hook_answers_for_the_cluster(
    runtime: Runtime,
    server: Server,
    hook: str,
    nodes: tuple[RabbitNode, RabbitNode],
    certificate: ServerCertificate,
) -> None:
    """Devices on either node let in (one over TLS), kept to their own topics, refused
    with another's secret, an unknown serial or a rotated secret; the service's account
    publishes a command on one node that reaches a device on the other."""
    first, second = nodes
    assert first.mqtts_port is not None
    # the hook answers its broker only, and never on the public port
    async with httpx.AsyncClient() as http:
        assert (await http.post(f"{hook}/mqtt/authenticate", json={})).status_code == 401
        public = await http.post(f"{server.base_url}/mqtt/authenticate", json={})
        assert public.status_code == 404
    trusting = ssl.create_default_context(cafile=str(certificate.ca))
    # a device over TLS on one node, another on the other, the link's account
    # on the second: a command published there reaches the device on the first
    async with (
        client(first.mqtts_port, "PLUG-1", SECRET, tls_context=trusting) as plug,
        client(second.mqtt_port, "PLUG-2", OTHER_SECRET) as other,
        client(second.mqtt_port, LINK_USER, LINK_PASSWORD) as link,
    ):
        await plug.subscribe("devices/PLUG-1/commands", qos=1)
        await plug.publish("devices/PLUG-1/state", b'{"power": [1.5]}', qos=1)
        await other.publish("devices/PLUG-2/state", b'{"power": [2]}', qos=1)
        await link.subscribe("devices/+/state", qos=1)
        command = {"id": "1", "name": "switch_on_off", "params": {"state": "on"}}
        await link.publish("devices/PLUG-1/commands", msgspec.json.encode(command), qos=1)
        async with asyncio.timeout(WAIT_S):
            async for message in plug.messages:
                assert msgspec.json.decode(message.payload) == command
                break
    assert await refused(second.mqtt_port, "PLUG-1", OTHER_SECRET)  # another's
    assert await refused(first.mqtt_port, "PLUG-9", SECRET)  # no such controller
    assert await refused(second.mqtt_port, LINK_USER, "wrong")
    # another device's topic: RabbitMQ closes the connection of who tries
    async with client(second.mqtt_port, "PLUG-1", SECRET) as plug:
        await plug.publish("devices/PLUG-2/state", b"{}", qos=0)
        assert await closed_by_the_broker(plug)
    async with client(first.mqtt_port, "PLUG-1", SECRET) as plug:
        asking = asyncio.create_task(plug.subscribe("devices/PLUG-2/commands", qos=1))
        assert await closed_by_the_broker(plug)
        asking.cancel()
    # a device connected when its secret is rotated: the link has the cluster end the
    # connection (through the first node's management API; the device is on the second)
    async with client(second.mqtt_port, "PLUG-1", SECRET) as plug:
        await eventually(lambda: is_online(runtime, "PLUG-1"))
        # the management API knows a connection from its next statistics (5 s at most)
        await eventually(lambda: _managed(first, "PLUG-1"), within=WAIT_S)
        new_secret = await rotate_device_secret(runtime, "PLUG-1")
        await connection_ends(plug, within=2)
    for node in (first, second):  # at once, on every node: nothing cached
        assert await refused(node.mqtt_port, "PLUG-1", SECRET)
    async with client(second.mqtt_port, "PLUG-1", new_secret) as plug:
        await plug.publish("devices/PLUG-1/state", b'{"power": [3]}', qos=1)
    assert "access_refused" in first.log() + second.log()


def _managed(node: RabbitNode, serial: str) -> bool:
    """Whether the cluster's management API lists a connection of ``serial``'s."""
    answer = ONE_SHOT.get(
        f"http://127.0.0.1:{node.management_port}/api/connections",
        auth=(LINK_USER, LINK_PASSWORD),
        timeout=WAIT_S,
    )
    assert answer.status_code == 200, answer.text
    return any(connection["user"] == serial for connection in answer.json())


async def _the_link_reads_the_cluster(server: Server, second: RabbitNode) -> None:
    """A reading stored, online followed, a command delivered and its result stored."""
    bearer = served_token(server, OWNER)
    async with client(second.mqtt_port, "PLUG-2", OTHER_SECRET) as plug:
        await plug.subscribe("devices/PLUG-2/commands", qos=1)
        reading = b'{"relay_state": "on", "power": [7.5]}'
        await plug.publish("devices/PLUG-2/state", reading, qos=1)
        assert await eventually(lambda: fetch(server, bearer).get("power") == [7.5])
        assert fetch(server, bearer)["online"] is True
        made = switch_command(server, bearer, "PLUG-2", "off")
        async with asyncio.timeout(WAIT_S):
            async for message in plug.messages:
                delivered = msgspec.json.decode(message.payload)
                break
        assert delivered["id"] == made and delivered["params"] == {"state": "off"}
        result = {"id": made, "status": "succeeded"}
        await plug.publish("devices/PLUG-2/commands/result", msgspec.json.encode(result), qos=1)
        await eventually(
            lambda: served_command_status(server, bearer, "PLUG-2", made) == "succeeded"
        )
    await eventually(lambda: fetch(server, bearer)["online"] is False)


def _messages_taken(server: Server) -> float:
    """The readings this serve's link took (its /metrics)."""
    page = ONE_SHOT.get(f"{server.base_url}/metrics", timeout=10).text
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in page.splitlines()
        if line.startswith('devicecontrol_device_messages_total{kind="state"}')
    )


async def _two_links_share_the_messages(
    runtime: Runtime, servers: tuple[Server, Server], node: RabbitNode
) -> None:
    """Sixteen devices' readings, every one stored once, split between the two links by
    the shard of each device (a hash of its topic)."""
    serials = [f"SHARE-{n:02d}" for n in range(16)]
    for serial in serials:
        await make_controller(runtime, serial, device_secret=SECRET, owner=OWNER)
    before = [_messages_taken(server) for server in servers]
    for serial in serials:
        async with client(node.mqtt_port, serial, SECRET) as device:
            for power in (1, 2, 3):
                await device.publish(f"devices/{serial}/state", b'{"power": [%d]}' % power, qos=1)

    async def stored() -> int:
        async with runtime.database.read() as connection:
            query = (
                select(func.count())
                .select_from(readings.join(controllers))
                .where(controllers.c.serial_number.like("SHARE-%"))
            )
            return int((await connection.execute(query)).scalar_one())

    assert await eventually(lambda: _once(stored, 48))
    await asyncio.sleep(0.5)  # nothing stored twice, either
    assert await stored() == 48
    taken = [_messages_taken(server) - was for server, was in zip(servers, before, strict=True)]
    assert sum(taken) == 48 and all(share > 0 for share in taken), taken


async def _once(count: Any, goal: int) -> bool:
    return await count() >= goal
