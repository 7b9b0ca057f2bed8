"""Commands to devices (contract §9, Commands): at least once, in creation order, only after
the device subscribes, never once expired, whichever process made them."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import select

from devicecontrol.database.tables import commands
from devicecontrol.devices.link.compose import build_link
from devicecontrol.runtime import Runtime
from tests.devices.link.support import (
    command_status,
    device,
    eventually,
    new_command,
    next_command,
    nothing_arrives,
    provision_owned,
    running_link,
)

SERIAL = "PLUG-1"
COMMANDS = f"devices/{SERIAL}/commands"


@pytest.fixture
async def plug(runtime) -> str:
    return await provision_owned(runtime, SERIAL)


async def test_commands_queued_while_offline_arrive_in_order_once_the_device_subscribes(
    runtime, plug
):
    made = [await new_command(runtime, plug, state) for state in ("on", "off", "on")]
    async with running_link(runtime) as link, device(link, plug) as client:
        await nothing_arrives(client, within=0.4)  # connected, not subscribed: nothing
        assert [await command_status(runtime, plug, c) for c in made] == ["queued"] * 3
        await client.subscribe(COMMANDS, qos=1)
        received = [await next_command(client) for _ in made]
        assert [r["id"] for r in received] == [c.public_id for c in made]
        assert received[0] == {
            "id": made[0].public_id,
            "name": "switch_on_off",
            "params": {"state": "on"},
            "expires_at": made[0].expires_at.strftime("%Y-%m-%d %H:%M:%S"),
        }
        assert [await command_status(runtime, plug, c) for c in made] == ["sent"] * 3


async def test_a_command_made_by_another_process_reaches_the_connected_device(
    runtime, settings, plug
):
    other = Runtime.from_settings(settings)  # another serve worker, in real life
    try:
        async with running_link(runtime) as link, device(link, plug) as client:
            await client.subscribe(COMMANDS, qos=1)
            await nothing_arrives(client, within=0.2)
            first = await new_command(other, plug, "on")
            assert (await next_command(client, within=1))["id"] == first.public_id
            second = await new_command(other, plug, "off")
            assert (await next_command(client, within=1))["id"] == second.public_id
    finally:
        await other.close()


async def test_a_sent_command_without_a_result_is_delivered_again_after_a_reconnect(runtime, plug):
    command = await new_command(runtime, plug)
    async with running_link(runtime) as link:
        async with device(link, plug) as client:
            await client.subscribe(COMMANDS, qos=1)
            assert (await next_command(client))["id"] == command.public_id
        async with device(link, plug) as client:
            await nothing_arrives(client, within=0.3)
            await client.subscribe(COMMANDS, qos=1)
            assert (await next_command(client))["id"] == command.public_id
            result = b'{"id": "%s", "status": "succeeded"}' % command.public_id.encode()
            await client.publish(f"{COMMANDS}/result", result)
            await eventually(lambda: _status_is(runtime, plug, command, "succeeded"))
        async with device(link, plug) as client:  # finished: not again
            await client.subscribe(COMMANDS, qos=1)
            await nothing_arrives(client, within=0.4)


async def test_an_expired_command_is_never_delivered(runtime, plug, clock):
    """Time moves by the clock (ttl 1 s, then 2 s later), not by sleeping."""
    queued = await new_command(runtime, plug, "on", ttl_s=1)
    async with running_link(runtime) as link:
        async with device(link, plug) as client:
            await client.subscribe(COMMANDS, qos=1)
            sent = await next_command(client)
            assert sent["id"] == queued.public_id  # sent, no result
        unsent = await new_command(runtime, plug, "off", ttl_s=1)
        clock.advance(2)
        later = await new_command(runtime, plug, "on")
        async with device(link, plug) as client:
            await client.subscribe(COMMANDS, qos=1)
            assert (await next_command(client))["id"] == later.public_id
            await nothing_arrives(client, within=0.4)
        assert await command_status(runtime, plug, queued) == "expired"
        assert await command_status(runtime, plug, unsent) == "expired"


async def stored_status(runtime: Runtime, public_id: str) -> str:
    async with runtime.database.read() as connection:
        query = select(commands.c.status).where(commands.c.public_id == public_id)
        return str((await connection.execute(query)).scalar_one())


async def test_only_the_coordinating_link_stores_expiries(runtime, plug, clock):
    """Of several link processes only one keeps the upkeep (expiries, the events' log, the
    rollups: two rolling the same quarter hour would collide); its first round runs as
    the link starts."""
    overdue = await new_command(runtime, plug, "on", ttl_s=1)
    clock.advance(2)
    sharer = build_link(runtime, listen="127.0.0.1:0")
    sharer.broker.coordinates = False  # what a link of shard 1 of 2 is
    await sharer.start()
    try:
        await asyncio.sleep(0.5)
        assert await stored_status(runtime, overdue.public_id) == "queued"
    finally:
        await sharer.stop()
    async with running_link(runtime):
        await eventually(lambda: _is(stored_status(runtime, overdue.public_id), "expired"))


async def _is(status, expected: str) -> bool:
    return await status == expected


async def test_a_resumed_persistent_session_gets_its_commands_without_subscribing_again(
    runtime, plug
):
    async with running_link(runtime) as link:
        async with device(link, plug, clean_session=False) as client:
            await client.subscribe(COMMANDS, qos=1)
        command = await new_command(runtime, plug)
        async with device(link, plug, clean_session=False) as client:
            assert (await next_command(client))["id"] == command.public_id


async def test_a_device_that_unsubscribes_gets_nothing_more(runtime, plug):
    async with running_link(runtime) as link, device(link, plug) as client:
        await client.subscribe(COMMANDS, qos=1)
        await client.unsubscribe(COMMANDS)
        command = await new_command(runtime, plug)
        await nothing_arrives(client, within=0.4)
        assert await command_status(runtime, plug, command) == "queued"


async def _status_is(runtime, serial, command, status: str) -> bool:
    return await command_status(runtime, serial, command) == status


async def test_a_command_is_published_at_qos_1(runtime, plug):
    async with running_link(runtime) as link, device(link, plug) as client:
        await client.subscribe(COMMANDS, qos=1)
        await new_command(runtime, plug)
        async with asyncio.timeout(5):
            async for message in client.messages:
                assert (message.qos, str(message.topic)) == (1, COMMANDS)
                break
