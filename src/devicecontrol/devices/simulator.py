"""Simulated devices: real MQTT clients that report readings and carry out commands.

For demos, tests and load: each device logs in with its serial and secret like firmware
would, reports readings that look like its type's, and answers every command with a
result (``succeeded`` with the settings it applied, or ``failed`` for a command it does
not know). A command id it has seen is answered again with the same result, as the
contract asks of firmware (delivery is at-least-once).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import aiomqtt
import msgspec

from devicecontrol.devices import topics
from devicecontrol.devices.catalogue import CATALOGUE

# after a refused or dropped connection: doubling up to the maximum, so that a device with a
# wrong secret does not spend its throttle in a tight loop
RECONNECT_DELAY_S = 1.0
MAX_RECONNECT_DELAY_S = 30.0
KEEPALIVE_S = 30
CLIENT_TIMEOUT_S = 5  # for each MQTT operation, the disconnect on stopping included
log = logging.getLogger("devicecontrol.simulator")


@dataclass(frozen=True, slots=True)
class DeviceCredentials:
    serial_number: str
    secret: str
    type: str


@dataclass
class DeviceState:
    """What the simulated device is set to, and the results it already gave."""

    settings: dict[str, Any] = field(default_factory=dict)
    results: dict[str, dict[str, Any]] = field(default_factory=dict)
    received: list[dict[str, Any]] = field(default_factory=list)


def reading_of(device_type: str, state: DeviceState, rng: random.Random) -> dict[str, Any]:
    """A reading shaped like the type's (contract §9 shows melissa's and smart_plug's)."""
    temp = round(21.5 + rng.uniform(-0.8, 0.8), 1)
    humidity = round(40.0 + rng.uniform(-3, 3), 1)
    climate = {
        "temp": temp,
        "humidity": humidity,
        "raw_temperature": int(temp * 1000),
        "raw_humidity": int(humidity * 1000),
    }
    relay = state.settings.get("state", "on")
    if device_type == "melissa":
        return climate
    if device_type == "smart_plug":
        return {
            "relay_state": relay,
            "power": [round(rng.uniform(10, 14), 1) if relay == "on" else 0.0],
        }
    if device_type == "bobbie":
        return {**climate, "relay_state": relay}
    if device_type == "vicki":
        return {"temp": temp, "battery": 87, "keepalive": state.settings.get("time", 10)}
    return {"uptime": rng.randint(1, 10**6)}


def carry_out(device_type: str, command: dict[str, Any], state: DeviceState) -> dict[str, Any]:
    """The result message for a command; the same one again for an id already carried out."""
    command_id = str(command.get("id"))
    if command_id in state.results:
        return state.results[command_id]
    state.received.append(command)
    name, params = command.get("name"), command.get("params") or {}
    known = CATALOGUE.get(device_type)
    if known is not None and name not in known:
        result: dict[str, Any] = {
            "id": command_id,
            "status": "failed",
            "error": f"unknown command {name}",
        }
    else:
        state.settings.update(params)
        result = {"id": command_id, "status": "succeeded", "result": {"applied": params}}
    state.results[command_id] = result
    return result


async def run_device(
    credentials: DeviceCredentials,
    host: str,
    port: int,
    *,
    interval_s: float,
    state: DeviceState | None = None,
    seed: int | None = None,
    on_connected: Callable[[str], None] | None = None,
    keepalive_s: int = KEEPALIVE_S,
) -> None:
    """Stay connected until cancelled: after the broker closes the connection, restarts, or
    the network stalls (no PINGRESP within the keep-alive), connect again."""
    state = state or DeviceState()
    rng = random.Random(seed)  # readings, not secrets
    sn = credentials.serial_number
    delay = RECONNECT_DELAY_S
    while True:
        try:
            async with aiomqtt.Client(
                host,
                port,
                identifier=sn,
                username=sn,
                password=credentials.secret,
                clean_session=True,
                keepalive=keepalive_s,
                timeout=CLIENT_TIMEOUT_S,
            ) as client:
                await client.subscribe(topics.commands_topic(sn), qos=1)
                delay = RECONNECT_DELAY_S
                if on_connected is not None:
                    on_connected(sn)
                await _until_one_ends(
                    _report(client, credentials, state, rng, interval_s),
                    _obey(client, credentials, state),
                )
        except aiomqtt.MqttError as failure:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                # the client's disconnect failed while the device was being stopped: stop
                raise asyncio.CancelledError from None
            log.warning("device %s: %s; again in %.0f s", sn, failure, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, MAX_RECONNECT_DELAY_S)


async def _until_one_ends(*jobs: Coroutine[Any, Any, None]) -> None:
    """Run ``jobs`` side by side until one ends, then stop the others and raise what ended it.

    Not a ``TaskGroup``: on Python 3.11 a child that fails while the group waits in its
    ``__aexit__`` leaves the parent task's cancellation count at 1 (``Task.cancelling()``),
    which ``run_device`` would read as being stopped, and the device would never reconnect.
    """
    tasks = [asyncio.ensure_future(job) for job in jobs]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        await stop_tasks(tasks)
    for task in done:
        task.result()


async def _report(
    client: aiomqtt.Client,
    credentials: DeviceCredentials,
    state: DeviceState,
    rng: random.Random,
    interval_s: float,
) -> None:
    topic = topics.state_topic(credentials.serial_number)
    while True:
        reading = reading_of(credentials.type, state, rng)
        await client.publish(topic, msgspec.json.encode(reading), qos=1)
        await asyncio.sleep(interval_s)


async def _obey(client: aiomqtt.Client, credentials: DeviceCredentials, state: DeviceState) -> None:
    topic = topics.result_topic(credentials.serial_number)
    async for message in client.messages:
        try:
            command = msgspec.json.decode(message.payload)
        except msgspec.DecodeError:
            continue
        if not isinstance(command, dict):
            continue
        result = carry_out(credentials.type, command, state)
        await client.publish(topic, msgspec.json.encode(result), qos=1)


async def stop_tasks(
    tasks: list[asyncio.Task[None]], *, attempts: int = 3, patience_s: float = CLIENT_TIMEOUT_S + 1
) -> None:
    """Cancel running devices (or a device's jobs) and wait for them, cancelling again any
    still running.

    On Python 3.11 a cancellation that meets an MQTT operation's own timeout inside the
    client library can be swallowed (``asyncio.timeout``); a second one, ``patience_s``
    later (an MQTT operation's own timeout, and a second), ends the device.
    """
    pending = {task for task in tasks if not task.done()}
    for _ in range(attempts):
        if not pending:
            return
        for task in pending:
            task.cancel()
        _, pending = await asyncio.wait(pending, timeout=patience_s)
    if pending:
        raise RuntimeError(f"{len(pending)} simulated devices or jobs did not stop")


async def simulate(
    devices: list[DeviceCredentials], host: str, port: int, *, interval_s: float
) -> None:
    """Run every device until cancelled (Ctrl-C, SIGTERM)."""
    async with asyncio.TaskGroup() as group:
        for index, device in enumerate(devices):
            group.create_task(
                run_device(device, host, port, interval_s=interval_s, seed=index),
                name=f"device {device.serial_number}",
            )
