"""The broker hook behind a real RabbitMQ node (its MQTT plugin and HTTP auth backend),
with a real ``serve`` answering the hook: devices as real MQTT clients are let in, kept to
their own topics and refused after a rotation by the broker itself, through the hook.
One node for the whole test: a node takes about 10 s to start.
"""

from __future__ import annotations

import asyncio

import aiomqtt
import httpx
import pytest

from devicecontrol.config import Settings
from devicecontrol.devices.identity import rotate_device_secret
from devicecontrol.runtime import Runtime
from tests.factories import make_controller
from tests.processes import free_port, running_server
from tests.rabbitmq import private_rabbitmq

TOKEN = "hook-token-of-the-rabbitmq-test-0123456789"
SECRET, OTHER_SECRET = "plug-one-secret-rabbit", "plug-two-secret-rabbit"
WAIT_S = 10


def device(port: int, serial: str, secret: str) -> aiomqtt.Client:
    return aiomqtt.Client(
        "127.0.0.1",
        port,
        identifier=serial,
        username=serial,
        password=secret,
        protocol=aiomqtt.ProtocolVersion.V311,
        timeout=WAIT_S,
    )


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


async def refused(port: int, serial: str, secret: str) -> bool:
    try:
        async with device(port, serial, secret):
            return False
    except aiomqtt.MqttError:
        return True


@pytest.mark.parametrize("backend", ["postgresql"])
async def test_rabbitmq_lets_devices_in_and_keeps_them_to_their_topics_through_the_hook(
    settings: Settings, tmp_path
):
    runtime = Runtime.from_settings(settings)
    try:
        await make_controller(runtime, "PLUG-1", device_secret=SECRET)
        await make_controller(runtime, "PLUG-2", device_secret=OTHER_SECRET)
        hook_port = free_port()
        env = {
            "DEVICECONTROL_BROKER_HOOK_LISTEN": f"127.0.0.1:{hook_port}",
            "DEVICECONTROL_BROKER_HOOK_TOKEN": TOKEN,
        }
        hook = f"http://127.0.0.1:{hook_port}"
        with running_server(settings.database_url, tmp_path, env=env) as server:
            # the hook answers its broker only, and never on the public port
            async with httpx.AsyncClient() as http:
                assert (await http.post(f"{hook}/mqtt/authenticate", json={})).status_code == 401
                public = await http.post(f"{server.base_url}/mqtt/authenticate", json={})
                assert public.status_code == 404
            with private_rabbitmq(hook, TOKEN) as node:
                port = node.mqtt_port
                async with device(port, "PLUG-1", SECRET) as plug:
                    await plug.subscribe("devices/PLUG-1/commands", qos=1)
                    await plug.publish("devices/PLUG-1/state", b'{"power": [1.5]}', qos=1)
                    async with device(port, "PLUG-2", OTHER_SECRET) as other:
                        await other.publish("devices/PLUG-2/state", b'{"power": [2]}', qos=1)
                assert await refused(port, "PLUG-1", OTHER_SECRET)  # another's secret
                assert await refused(port, "PLUG-9", SECRET)  # no such controller
                # another device's topic: RabbitMQ closes the connection of who tries
                async with device(port, "PLUG-1", SECRET) as plug:
                    await plug.publish("devices/PLUG-2/state", b"{}", qos=0)
                    assert await closed_by_the_broker(plug)
                async with device(port, "PLUG-1", SECRET) as plug:
                    asking = asyncio.create_task(plug.subscribe("devices/PLUG-2/commands", qos=1))
                    assert await closed_by_the_broker(plug)
                    asking.cancel()
                new_secret = await rotate_device_secret(runtime, "PLUG-1")
                assert await refused(port, "PLUG-1", SECRET)  # at once, no cache between
                async with device(port, "PLUG-1", new_secret) as plug:
                    await plug.publish("devices/PLUG-1/state", b'{"power": [3]}', qos=1)
                assert "access_refused" in node.log()
    finally:
        await runtime.close()
