"""Who may connect to the device link, and ``online`` (contract §9, Identity and Online)."""

from __future__ import annotations

import asyncio
import dataclasses

import aiomqtt
import pytest
from sqlalchemy import update

from devicecontrol.config import ThrottleRule
from devicecontrol.database.tables import controllers
from devicecontrol.devices import identity
from devicecontrol.devices.link.compose import build_link
from devicecontrol.devices.link.ports import LinkError
from devicecontrol.runtime import Runtime
from tests.devices.link.support import (
    SECRET,
    RawDevice,
    connection_ends,
    controller,
    device,
    eventually,
    is_offline,
    is_online,
    metric,
    new_command,
    next_command,
    provision,
    provision_owned,
    running_link,
    stored_readings,
    writes_locked,
)

SERIAL = "PLUG-1"
NOT_AUTHORIZED = "Not authorized"  # paho's name for CONNACK return code 5
OFFLINE_WITHIN_S = 2.5  # the contract's 2 s, and the 20 ms of polling


async def refused_code(client: aiomqtt.Client) -> str:
    with pytest.raises(aiomqtt.MqttCodeError) as refused:
        async with client:
            pass
    return str(refused.value.rc)


async def test_a_device_with_its_secret_is_online_while_connected_and_offline_after(runtime):
    await provision(runtime, SERIAL)
    async with running_link(runtime) as link:
        async with device(link, SERIAL):
            await eventually(lambda: is_online(runtime, SERIAL))
            assert (await controller(runtime, SERIAL)).last_seen is not None
            assert metric("devicecontrol_devices_connected") == 1
        await eventually(lambda: is_offline(runtime, SERIAL), within=OFFLINE_WITHIN_S)
        assert metric("devicecontrol_devices_connected") == 0


@pytest.mark.parametrize(
    ("serial", "secret", "client_id"),
    [
        (SERIAL, "wrong-secret", SERIAL),
        (SERIAL, "", SERIAL),
        ("NOSUCH-1", SECRET, "NOSUCH-1"),
        (SERIAL, SECRET, "another-client-id"),
    ],
    ids=["wrong secret", "empty secret", "unknown serial", "client id is not the username"],
)
async def test_a_connect_that_does_not_prove_the_device_is_refused_not_authorized(
    runtime, serial, secret, client_id
):
    await provision(runtime, SERIAL)
    async with running_link(runtime) as link:
        client = device(link, serial, secret, identifier=client_id)
        assert await refused_code(client) == NOT_AUTHORIZED
        assert not await is_online(runtime, SERIAL)


async def test_the_refusal_is_connack_return_code_5_on_the_wire(runtime):
    await provision(runtime, SERIAL)
    async with running_link(runtime) as link:
        raw, code = await RawDevice.connect(link.port, SERIAL, "wrong-secret")
        assert code == 5
        assert await raw.closed_by_broker(within=2)


@pytest.mark.parametrize(
    ("setting", "failing_serials"),
    [
        ("throttle_device_per_serial", [SERIAL, SERIAL]),
        ("throttle_device_per_address", ["NOSUCH-1", "NOSUCH-2"]),
    ],
    ids=["per serial", "per address"],
)
async def test_failed_connects_are_throttled_and_then_even_the_right_secret_is_refused(
    settings, setting, failing_serials
):
    rule = ThrottleRule(limit=len(failing_serials), window_s=60)
    runtime = Runtime.from_settings(dataclasses.replace(settings, **{setting: rule}))
    try:
        await provision(runtime, SERIAL)
        async with running_link(runtime) as link:
            async with device(link, SERIAL):  # the right secret works, until...
                pass
            for serial in failing_serials:
                assert await refused_code(device(link, serial, "wrong")) == NOT_AUTHORIZED
            assert await refused_code(device(link, SERIAL)) == NOT_AUTHORIZED
    finally:
        await runtime.close()


async def test_a_killed_socket_makes_the_device_offline_within_2_s(runtime):
    await provision(runtime, SERIAL)
    async with running_link(runtime) as link:
        raw, code = await RawDevice.connect(link.port, SERIAL)
        assert code == 0
        await eventually(lambda: is_online(runtime, SERIAL))
        raw.kill()
        await eventually(lambda: is_offline(runtime, SERIAL), within=OFFLINE_WITHIN_S)


async def test_a_device_silent_past_its_keep_alive_is_dropped_and_offline(runtime):
    await provision(runtime, SERIAL)
    async with running_link(runtime) as link:
        raw, code = await RawDevice.connect(link.port, SERIAL, keep_alive=1)
        assert code == 0
        await eventually(lambda: is_online(runtime, SERIAL))
        # MQTT's 1.5 keep-alives (2 s rounded up) of silence, then at most 2 s to offline
        assert await raw.closed_by_broker(within=3)
        await eventually(lambda: is_offline(runtime, SERIAL), within=OFFLINE_WITHIN_S)


async def test_start_up_sets_every_device_offline_until_it_connects(runtime):
    await provision(runtime, SERIAL)
    async with runtime.database.write() as connection:
        await connection.execute(update(controllers).values(online=True))
    async with running_link(runtime):
        assert not await is_online(runtime, SERIAL)


async def test_a_second_connection_takes_over_and_the_device_stays_online(runtime):
    await provision_owned(runtime, SERIAL)
    async with running_link(runtime) as link:
        async with device(link, SERIAL) as first:
            await eventually(lambda: is_online(runtime, SERIAL))
            async with device(link, SERIAL) as second:
                await connection_ends(first, within=2)
                await second.subscribe(f"devices/{SERIAL}/commands", qos=1)
                await asyncio.sleep(0.3)  # past the old connection's end
                assert await is_online(runtime, SERIAL)
                command = await new_command(runtime, SERIAL)
                assert (await next_command(second))["id"] == command.public_id
        await eventually(lambda: is_offline(runtime, SERIAL), within=OFFLINE_WITHIN_S)


@pytest.mark.parametrize("clean_session", [True, False], ids=["clean", "persistent"])
async def test_a_refused_connect_with_a_live_devices_serial_leaves_the_device_alone(
    runtime, clean_session
):
    """amqtt 0.12.1 alone would delete the live session's subscription (clean) or take the
    connection over (persistent) before refusing the intruder."""
    await provision_owned(runtime, SERIAL)
    async with running_link(runtime) as link:
        live = device(link, SERIAL, clean_session=clean_session)
        async with live:
            await live.subscribe(f"devices/{SERIAL}/commands", qos=1)
            await eventually(lambda: is_online(runtime, SERIAL))
            intruder = device(link, SERIAL, "not-the-secret", clean_session=clean_session)
            assert await refused_code(intruder) == NOT_AUTHORIZED
            command = await new_command(runtime, SERIAL)
            assert (await next_command(live))["id"] == command.public_id
            await live.publish(f"devices/{SERIAL}/state", b'{"power": [1.5]}')
            await eventually(lambda: stored_readings(runtime, SERIAL))
            assert await is_online(runtime, SERIAL)


async def test_rotating_the_secret_closes_the_live_connection_within_2_s(runtime):
    await provision(runtime, SERIAL)
    async with running_link(runtime) as link:
        async with device(link, SERIAL) as client:
            await eventually(lambda: is_online(runtime, SERIAL))
            new_secret = await identity.rotate_device_secret(runtime, SERIAL)
            await connection_ends(client, within=2)
        await eventually(lambda: is_offline(runtime, SERIAL), within=OFFLINE_WITHIN_S)
        assert await refused_code(device(link, SERIAL, SECRET)) == NOT_AUTHORIZED
        async with device(link, SERIAL, new_secret):
            await eventually(lambda: is_online(runtime, SERIAL))


async def test_a_taken_port_is_a_one_line_link_error(runtime):
    async with running_link(runtime) as link:
        taken = build_link(runtime, listen=f"127.0.0.1:{link.port}")
        with pytest.raises(LinkError) as failed:
            await taken.start()
    message = str(failed.value)
    assert "\n" not in message
    assert f"127.0.0.1:{link.port}" in message
    assert "DEVICECONTROL_MQTT_LISTEN" in message


async def test_a_connect_with_the_right_secret_writes_nothing_synchronously(runtime, database_url):
    """While another connection holds the write lock, a device with its right secret is
    let in at once (its throttle and secret are read; online is written later)."""
    await provision(runtime, SERIAL)
    async with running_link(runtime) as link:
        async with writes_locked(database_url, "controllers", "throttle_failures"):
            raw, code = await RawDevice.connect(link.port, SERIAL)
            assert code == 0
        await eventually(lambda: is_online(runtime, SERIAL))
        raw.kill()
