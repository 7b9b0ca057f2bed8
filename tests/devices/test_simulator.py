"""Simulated devices (`devicecontrol devices simulate`): real MQTT clients that report
readings of their type and carry out commands, exactly once per command id."""

from __future__ import annotations

import asyncio
import random

import aiomqtt
import msgspec
import pytest

from devicecontrol.devices.simulator import (
    RECONNECT_DELAY_S,
    DeviceCredentials,
    DeviceState,
    carry_out,
    reading_of,
    run_device,
    stop_tasks,
)
from tests.mosquitto import private_mosquitto
from tests.tcp_proxy import tcp_proxy

DEADLINE_S = 10


@pytest.fixture
def broker(tmp_path):
    with private_mosquitto(tmp_path) as mosquitto:
        yield mosquitto


@pytest.fixture
def broker_port(broker):
    return broker.port


async def next_message(messages, topic: str) -> dict:
    async with asyncio.timeout(DEADLINE_S):
        async for message in messages:
            if message.topic.matches(topic):
                return msgspec.json.decode(message.payload)
    raise AssertionError(f"no message on {topic}")


async def test_a_simulated_melissa_reports_readings_and_carries_out_a_command(broker_port):
    device = DeviceCredentials("SIM-MEL-1", "sim-secret", "melissa")
    state = DeviceState()
    connected = asyncio.Event()
    async with aiomqtt.Client("127.0.0.1", broker_port, identifier="observer") as observer:
        await observer.subscribe("devices/SIM-MEL-1/#", qos=1)
        task = asyncio.create_task(
            run_device(device, "127.0.0.1", broker_port, interval_s=0.2, state=state,
                       on_connected=lambda _: connected.set())
        )  # fmt: skip
        try:
            reading = await next_message(observer.messages, "devices/SIM-MEL-1/state")
            assert set(reading) == {"temp", "humidity", "raw_temperature", "raw_humidity"}
            assert 16 < reading["temp"] < 30 and 0 < reading["humidity"] < 100
            await asyncio.wait_for(connected.wait(), DEADLINE_S)
            command = {"id": "c-1", "name": "send_ir_code",
                       "params": {"state": 1, "mode": 3, "temp": 22, "fan": 2},
                       "expires_at": "2030-01-01 00:00:00"}  # fmt: skip
            await observer.publish(
                "devices/SIM-MEL-1/commands", msgspec.json.encode(command), qos=1
            )
            result = await next_message(observer.messages, "devices/SIM-MEL-1/commands/result")
            assert result == {"id": "c-1", "status": "succeeded",
                              "result": {"applied": command["params"]}}  # fmt: skip
            assert state.settings == command["params"]
            # at-least-once delivery: the same id again gets the same result, applied once
            await observer.publish(
                "devices/SIM-MEL-1/commands", msgspec.json.encode(command), qos=1
            )
            again = await next_message(observer.messages, "devices/SIM-MEL-1/commands/result")
            assert again == result
            assert len(state.received) == 1
        finally:
            await stop_tasks([task])  # cancels again should aiomqtt swallow the first


@pytest.mark.parametrize(
    ("device_type", "fields"),
    [
        ("melissa", {"temp", "humidity", "raw_temperature", "raw_humidity"}),
        ("smart_plug", {"relay_state", "power"}),
        ("bobbie", {"temp", "humidity", "raw_temperature", "raw_humidity", "relay_state"}),
        ("vicki", {"temp", "battery", "keepalive"}),
        ("other", {"uptime"}),
    ],
)
def test_readings_look_like_their_type(device_type, fields):
    assert set(reading_of(device_type, DeviceState(), random.Random(1))) == fields


def test_a_plug_switched_off_reports_no_power_and_an_unknown_command_fails():
    state = DeviceState()
    done = carry_out("smart_plug", {"id": "1", "name": "switch_on_off",
                                    "params": {"state": "off"}}, state)  # fmt: skip
    assert done["status"] == "succeeded"
    assert reading_of("smart_plug", state, random.Random(1)) == {
        "relay_state": "off", "power": [0.0],
    }  # fmt: skip
    failed = carry_out("smart_plug", {"id": "2", "name": "send_ir_code", "params": {}}, state)
    assert failed == {"id": "2", "status": "failed", "error": "unknown command send_ir_code"}


async def test_stop_tasks_ends_a_device_that_swallowed_one_cancellation():
    swallowed = asyncio.Event()

    async def stubborn_device() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            swallowed.set()  # as a library's timeout can do on Python 3.11
        await asyncio.sleep(3600)

    task = asyncio.create_task(stubborn_device())
    await asyncio.sleep(0)
    await stop_tasks([task], patience_s=0.2)
    assert swallowed.is_set() and task.cancelled()


# --- the connection lost, and found again ----------------------------------------------------

KEEPALIVE_S = 1
# paho sends PINGREQ after a keep-alive with nothing received and gives up one keep-alive
# later without PINGRESP; then the first retry, and a second for a busy machine
BACK_WITHIN_S = 2 * KEEPALIVE_S + RECONNECT_DELAY_S + 2


@pytest.mark.parametrize("loss", ["broker closes", "broker restarts", "network stalls"])
async def test_a_simulated_device_connects_again_after_losing_its_connection(broker, loss):
    """``serve --demo``'s devices stay: a take-over of the client id, a restarted broker or a
    stalled network must not leave one offline for good."""
    device = DeviceCredentials("SIM-PLUG-1", "sim-secret", "smart_plug")
    connects: asyncio.Queue[str] = asyncio.Queue()
    async with tcp_proxy(broker.port) as proxy:
        task = asyncio.create_task(
            run_device(device, "127.0.0.1", proxy.port, interval_s=3600,
                       on_connected=connects.put_nowait, keepalive_s=KEEPALIVE_S)
        )  # fmt: skip
        try:
            await asyncio.wait_for(connects.get(), DEADLINE_S)
            if loss == "broker closes":
                proxy.cut()
            elif loss == "broker restarts":
                await asyncio.to_thread(broker.stop)
                await asyncio.to_thread(broker.start)
            else:
                proxy.stall()  # nothing more either way, and no FIN: only keep-alive tells
            await asyncio.wait_for(connects.get(), BACK_WITHIN_S)
            assert proxy.accepted == 2
            assert not task.done()
        finally:
            await stop_tasks([task])
