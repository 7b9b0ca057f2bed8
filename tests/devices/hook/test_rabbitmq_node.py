"""The broker hook behind a real two-node RabbitMQ cluster (its MQTT plugin and HTTP auth
backend), with a real ``serve`` answering the hook: devices as real MQTT clients on either
node are let in, kept to their own topics and refused after a rotation by the cluster
itself, through the hook; one connects over TLS; the service's own account publishes a
command on one node that reaches a device on the other. One cluster for the whole test:
each node takes about 10 s to start.
"""

from __future__ import annotations

import asyncio
import ssl

import aiomqtt
import httpx
import msgspec
import pytest

from devicecontrol.config import Settings
from devicecontrol.devices.identity import rotate_device_secret
from devicecontrol.runtime import Runtime
from tests.factories import make_controller
from tests.processes import free_port, running_server
from tests.rabbitmq import private_rabbitmq_cluster
from tests.tls import server_certificate

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


@pytest.mark.parametrize("backend", ["postgresql"])
async def test_a_rabbitmq_cluster_lets_devices_in_and_keeps_them_to_their_topics_via_the_hook(
    settings: Settings, tmp_path
):
    runtime = Runtime.from_settings(settings)
    certificate = server_certificate(tmp_path / "tls")
    try:
        await make_controller(runtime, "PLUG-1", device_secret=SECRET)
        await make_controller(runtime, "PLUG-2", device_secret=OTHER_SECRET)
        hook_port = free_port()
        env = {
            "DEVICECONTROL_BROKER_HOOK_LISTEN": f"127.0.0.1:{hook_port}",
            "DEVICECONTROL_BROKER_HOOK_TOKEN": TOKEN,
            # the service's own account, as its link would log in (no link runs here)
            "DEVICECONTROL_MQTT_URL": f"mqtt://{LINK_USER}:{LINK_PASSWORD}@127.0.0.1:1",
        }
        hook = f"http://127.0.0.1:{hook_port}"
        with running_server(settings.database_url, tmp_path, env=env) as server:
            # the hook answers its broker only, and never on the public port
            async with httpx.AsyncClient() as http:
                assert (await http.post(f"{hook}/mqtt/authenticate", json={})).status_code == 401
                public = await http.post(f"{server.base_url}/mqtt/authenticate", json={})
                assert public.status_code == 404
            with private_rabbitmq_cluster(hook, TOKEN, tls=certificate) as (first, second):
                assert first.mqtts_port is not None
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
                    await link.publish(
                        "devices/PLUG-1/commands", msgspec.json.encode(command), qos=1
                    )
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
                new_secret = await rotate_device_secret(runtime, "PLUG-1")
                for node in (first, second):  # at once, on every node: nothing cached
                    assert await refused(node.mqtt_port, "PLUG-1", SECRET)
                async with client(second.mqtt_port, "PLUG-1", new_secret) as plug:
                    await plug.publish("devices/PLUG-1/state", b'{"power": [3]}', qos=1)
                assert "access_refused" in first.log() + second.log()
    finally:
        await runtime.close()
