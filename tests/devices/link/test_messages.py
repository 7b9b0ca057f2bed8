"""What devices send (contract §9, Topics and Readings): their own topics only, JSON objects
of at most 4 KiB, at most their message rate; every accepted reading stored."""

from __future__ import annotations

import msgspec
import pytest
from sqlalchemy import select

from devicecontrol.database.tables import latest_readings
from devicecontrol.devices.commands import service as commands
from tests.conftest import SQLITE_ENOUGH
from tests.devices.link.support import (
    controller,
    device,
    eventually,
    metric,
    new_command,
    next_command,
    owned,
    provision,
    provision_owned,
    running_link,
    stored_readings,
)

pytestmark = SQLITE_ENOUGH

SERIAL, OTHER = "PLUG-1", "PLUG-2"
DROPPED = "devicecontrol_device_messages_dropped_total"


def state(serial: str) -> str:
    return f"devices/{serial}/state"


def result(serial: str) -> str:
    return f"devices/{serial}/commands/result"


async def test_a_state_message_is_stored_as_the_latest_reading_and_sets_last_seen(runtime):
    await provision(runtime, SERIAL)
    async with running_link(runtime) as link, device(link, SERIAL) as client:
        before = metric("devicecontrol_device_messages_total", kind="state")
        await client.publish(state(SERIAL), b'{"relay_state": "on", "power": [12.5]}')
        await client.publish(state(SERIAL), b'{"relay_state": "off", "power": [0.0]}')
        stored = await eventually(
            lambda: _at_least(stored_readings(runtime, SERIAL), 2), what="two readings"
        )
        assert stored == [
            {"relay_state": "on", "power": [12.5]},
            {"relay_state": "off", "power": [0.0]},
        ]
        row = await controller(runtime, SERIAL)
        async with runtime.database.read() as connection:
            query = select(latest_readings).where(latest_readings.c.controller_id == row.id)
            latest = (await connection.execute(query)).one()
        assert msgspec.json.decode(latest.payload) == {"relay_state": "off", "power": [0.0]}
        assert row.last_seen is not None and row.last_seen >= latest.created_at
        assert metric("devicecontrol_device_messages_total", kind="state") == before + 2


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (b'{"blob": "' + b"x" * 4100 + b'"}', "too_large"),
        (b"[1, 2, 3]", "not_an_object"),
        (b'"just a string"', "not_an_object"),
        (b"{not json", "not_json"),
        (b"\xff\xfe{}", "not_json"),
    ],
    ids=["over 4 KiB", "array", "string", "not json", "not utf-8"],
)
async def test_a_payload_that_is_not_a_small_json_object_is_dropped_and_counted(
    runtime, payload, reason
):
    await provision(runtime, SERIAL)
    async with running_link(runtime) as link, device(link, SERIAL) as client:
        before = metric(DROPPED, reason=reason)
        await client.publish(state(SERIAL), payload)
        await eventually(lambda: metric(DROPPED, reason=reason) == before + 1)
        await client.publish(state(SERIAL), b'{"after": true}')  # the connection goes on
        assert await eventually(lambda: stored_readings(runtime, SERIAL)) == [{"after": True}]


async def test_a_payload_of_exactly_4_kib_is_taken(runtime):
    await provision(runtime, SERIAL)
    payload = b'{"blob": "' + b"x" * (4096 - 12) + b'"}'
    assert len(payload) == 4096
    async with running_link(runtime) as link, device(link, SERIAL) as client:
        await client.publish(state(SERIAL), payload)
        assert len(await eventually(lambda: stored_readings(runtime, SERIAL))) == 1


async def test_another_devices_topics_are_refused_and_a_publication_there_dropped(runtime):
    await provision(runtime, SERIAL)
    await provision(runtime, OTHER)
    async with running_link(runtime) as link, device(link, SERIAL) as client:
        for topic in (f"devices/{OTHER}/commands", "devices/#", f"devices/{SERIAL}/state", "#"):
            [granted] = await client.subscribe(topic, qos=1)
            assert granted.value == 0x80, topic  # SUBACK failure
        [granted] = await client.subscribe(f"devices/{SERIAL}/commands", qos=1)
        assert granted.value == 1
        before = metric(DROPPED, reason="forbidden_topic")
        for topic in (state(OTHER), result(OTHER), f"devices/{SERIAL}/commands", "elsewhere"):
            await client.publish(topic, b'{"temp": 99}')
        await eventually(lambda: metric(DROPPED, reason="forbidden_topic") == before + 4)
        await client.publish(state(SERIAL), b'{"temp": 21}')
        assert await eventually(lambda: stored_readings(runtime, SERIAL)) == [{"temp": 21}]
        assert await stored_readings(runtime, OTHER) == []


async def test_a_flooding_device_is_limited_without_disturbing_another(runtime, clock):
    """With time standing still the bucket never refills: exactly the burst of 20 passes."""
    await provision(runtime, SERIAL)
    await provision(runtime, OTHER)
    async with (
        running_link(runtime) as link,
        device(link, SERIAL) as flood,
        device(link, OTHER) as calm,
    ):
        before = metric(DROPPED, reason="rate_limited")
        for number in range(200):
            await flood.publish(state(SERIAL), msgspec.json.encode({"n": number}))
        await calm.publish(state(OTHER), b'{"temp": 20}')
        assert await eventually(lambda: stored_readings(runtime, OTHER), within=1) == [{"temp": 20}]
        await eventually(lambda: metric(DROPPED, reason="rate_limited") == before + 180)
        flooded = await eventually(lambda: _at_least(stored_readings(runtime, SERIAL), 20))
        assert flooded == [{"n": number} for number in range(20)]  # the first ones, in order
        clock.advance(1)  # a second later the device may speak again
        await flood.publish(state(SERIAL), b'{"n": "later"}')
        await eventually(lambda: _at_least(stored_readings(runtime, SERIAL), 21))


async def test_a_result_ends_its_command_once_and_repeated_or_unknown_ones_are_dropped(runtime):
    await provision_owned(runtime, SERIAL)
    async with running_link(runtime) as link, device(link, SERIAL) as client:
        await client.subscribe(f"devices/{SERIAL}/commands", qos=1)
        command = await new_command(runtime, SERIAL)
        assert (await next_command(client))["id"] == command.public_id
        counts = {
            reason: metric(DROPPED, reason=reason)
            for reason in ("late_result", "unknown_command", "malformed")
        }
        trips = metric("devicecontrol_command_round_trip_seconds_count")
        done = {"id": command.public_id, "status": "succeeded", "result": {"relay_state": "on"}}
        await client.publish(result(SERIAL), msgspec.json.encode(done))
        await client.publish(result(SERIAL), msgspec.json.encode({**done, "status": "failed"}))
        unknown = {"id": "f" * 24, "status": "succeeded"}
        await client.publish(result(SERIAL), msgspec.json.encode(unknown))
        await client.publish(result(SERIAL), b'{"id": 7, "status": "maybe"}')
        await eventually(lambda: metric(DROPPED, reason="malformed") == counts["malformed"] + 1)
        assert metric(DROPPED, reason="late_result") == counts["late_result"] + 1
        assert metric(DROPPED, reason="unknown_command") == counts["unknown_command"] + 1
        assert metric("devicecontrol_command_round_trip_seconds_count") == trips + 1
        device_owned = await _shown(runtime, command)
        assert (device_owned["status"], device_owned["result"]) == ("succeeded", done["result"])


async def _shown(runtime, command) -> dict:
    mine = await owned(runtime, SERIAL)
    return commands.shown(await commands.get_command(runtime, mine, command.public_id))


async def _at_least(readings, count: int):
    stored = await readings
    return stored if len(stored) >= count else None


async def test_messages_of_one_device_are_stored_in_the_order_sent(runtime):
    await provision(runtime, SERIAL)
    async with running_link(runtime) as link, device(link, SERIAL) as client:
        for number in range(15):
            await client.publish(state(SERIAL), msgspec.json.encode({"n": number}), qos=1)
        stored = await eventually(lambda: _at_least(stored_readings(runtime, SERIAL), 15))
        assert stored == [{"n": number} for number in range(15)]
