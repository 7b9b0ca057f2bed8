"""python -m bench.rabbitmq_link: how fast the device link stores readings from RabbitMQ.

A private RabbitMQ node (tests/rabbitmq.py) whose MQTT plugin asks the broker hook, and a
real ``devicecontrol serve`` running the hook and the link (``DEVICECONTROL_AMQP_URL``):

- **devices over MQTT**: DEVICES devices, real MQTT clients logged in through the hook,
  publish RATE readings a second in all at QoS 1 for SECONDS; measured: the readings stored
  a second meanwhile, and how long after the last one everything was stored;
- **the link's drain rate**: READINGS readings put on the link's queue while no link runs
  (published over AMQP as the MQTT plugin does, to ``amq.topic``), then the link started:
  readings stored a second until the queue is empty. Its ceiling, in the same run: the same
  readings drained by a bare AMQP consumer (aio-pika, acknowledging each, no database).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import aio_pika
import aiomqtt

from bench.databases import DEFAULT_POSTGRESQL_URL, throwaway_database
from bench.devices import (
    CLOCK_TICKS,
    SECRET,
    print_result,
    provision,
    serial,
    serving,
    stored_readings,
)
from bench.servers import free_port
from devicecontrol.devices.link.rabbitmq.client import declare_shards
from tests.rabbitmq import private_rabbitmq

TOKEN = "bench-hook-token-not-for-production-0123456789"  # noqa: S105 (benchmark data only)
LINK_USER, LINK_PASSWORD = "devicecontrol-link", "bench-link-password-0123456789"
READING = b'{"relay_state": "on", "power": [12.5]}'
CEILING_QUEUE = "devicecontrol.bench-ceiling"
READINGS = 50_000  # put on the queue for the drain rate


async def over_mqtt(port: int, devices: int, rate: float, seconds: float) -> int:
    """Every device connected, then RATE readings a second in all; how many were sent."""
    clients = [
        aiomqtt.Client("127.0.0.1", port, identifier=serial(n), username=serial(n),
                       password=SECRET, protocol=aiomqtt.ProtocolVersion.V311, timeout=30)
        for n in range(devices)
    ]  # fmt: skip
    for client in clients:
        await client.__aenter__()
    interval = devices / rate  # each device's

    async def device(client: aiomqtt.Client, offset: float, deadline: float) -> int:
        await asyncio.sleep(offset)
        count = 0
        while time.monotonic() < deadline:
            await client.publish(f"devices/{client.identifier}/state", READING, qos=1)
            count += 1
            await asyncio.sleep(interval)
        return count

    deadline = time.monotonic() + seconds
    counts = await asyncio.gather(
        *[device(c, i * interval / devices, deadline) for i, c in enumerate(clients)]
    )
    for client in clients:
        await client.__aexit__(None, None, None)
    return sum(counts)


async def _connect(
    amqp_port: int, login: str = LINK_USER, password: str = LINK_PASSWORD
) -> aio_pika.abc.AbstractConnection:
    return await aio_pika.connect(host="127.0.0.1", port=amqp_port, login=login, password=password)


async def fill(
    amqp_port: int, readings: int, devices: int, *, shards: int = 1, ceiling: bool = True
) -> None:
    """The links' shard queues (and the ceiling's) declared with the link's account, then
    READINGS readings published by the devices themselves (each logged in over AMQP through
    the hook, which lets a device write its own topics only)."""
    async with await _connect(amqp_port) as connection:
        channel = await connection.channel()
        await declare_shards(channel, shards)  # as the links declare them
        if ceiling:
            queue = await channel.declare_queue(CEILING_QUEUE, durable=True)
            await queue.bind("amq.topic", "devices.*.state")
    each = readings // devices

    async def device(n: int) -> None:
        async with await _connect(amqp_port, serial(n), SECRET) as connection:
            channel = await connection.channel(publisher_confirms=True)
            exchange = await channel.get_exchange("amq.topic", ensure=False)
            message = aio_pika.Message(READING, delivery_mode=aio_pika.DeliveryMode.PERSISTENT)
            key = f"devices.{serial(n)}.state"
            await asyncio.gather(*[exchange.publish(message, routing_key=key) for _ in range(each)])

    for first in range(0, devices, 20):
        await asyncio.gather(*[device(n) for n in range(first, min(first + 20, devices))])


async def drain_ceiling(amqp_port: int, readings: int, devices: int) -> float:
    """Messages a second a bare consumer takes off the ceiling's queue, acknowledging each."""
    async with await _connect(amqp_port) as connection:
        channel = await connection.channel()
        await channel.set_qos(prefetch_count=1000)
        queue = await channel.get_queue(CEILING_QUEUE, ensure=False)
        started = time.monotonic()
        taken = 0
        async with queue.iterator() as messages:
            async for message in messages:
                await message.ack()
                taken += 1
                if taken == readings // devices * devices:
                    break
        return taken / (time.monotonic() - started)


def wait_stored(database_url: str, goal: int, timeout_s: float) -> float:
    """Seconds until ``goal`` readings are stored (or the timeout)."""
    started = time.monotonic()
    while asyncio.run(stored_readings(database_url)) < goal:
        if time.monotonic() - started > timeout_s:
            break
        time.sleep(0.05)
    return time.monotonic() - started


WINDOW_S = 4.0  # the drain rate of several links, once all of them run
# who used the two cores in the window, by command line
CPU_USERS = {
    "links": b"devicecontrol.devices.link.process",
    "PostgreSQL": b"postgres",
    "RabbitMQ": b"beam.smp",
}


def cpu_seconds(users: dict[str, bytes] = CPU_USERS) -> dict[str, float]:
    """CPU seconds used so far by the processes of each of ``users`` (every process on the
    machine whose command line names it)."""
    used = dict.fromkeys(users, 0.0)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes()
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        for who, marker in users.items():
            if marker in command:
                used[who] += (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
    return used


def links_drain(
    database_url: str, node_port: int, env: dict[str, str], links: int, args: argparse.Namespace
) -> tuple[float, dict[str, float]]:
    """Readings stored a second by LINKS link processes (shards i/LINKS, each its own serve
    without the hook) draining queues filled beforehand, over WINDOW_S once all run; and
    the cores the links, PostgreSQL and RabbitMQ used meanwhile."""
    readings = 2 * args.readings  # enough to last until the last link has started
    drained = (readings // args.devices) * args.devices
    before = asyncio.run(stored_readings(database_url))
    asyncio.run(fill(node_port, readings, args.devices, shards=links, ceiling=False))
    with contextlib.ExitStack() as running:
        for index in range(links):
            shard = {**env, "DEVICECONTROL_LINK_SHARD": f"{index}/{links}"}
            del shard["DEVICECONTROL_BROKER_HOOK_LISTEN"]  # the hook-only serve answers
            running.enter_context(serving(database_url, free_port(), shard))
        first, cpu_before = asyncio.run(stored_readings(database_url)), cpu_seconds()
        time.sleep(WINDOW_S)
        rate = (asyncio.run(stored_readings(database_url)) - first) / WINDOW_S
        cpu_after = cpu_seconds()
        wait_stored(database_url, before + drained, 300)  # empty for the next run
    cores = {who: (cpu_after[who] - cpu_before[who]) / WINDOW_S for who in CPU_USERS}
    return rate, cores


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.rabbitmq_link", description=__doc__)
    parser.add_argument("--backend", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--postgresql-url", default=DEFAULT_POSTGRESQL_URL)
    parser.add_argument("--devices", type=int, default=200)
    parser.add_argument("--rate", type=float, default=500, help="readings a second, in all")
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--readings", type=int, default=READINGS, help="for the drain rate")
    args = parser.parse_args()
    result = measure(args)
    print(f"backend {args.backend}, {args.devices} devices, drain of {args.readings:,} readings")
    print_result(result, width=40, decimals=2)


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Every measurement of the module's docstring (``python -m bench.devices --broker
    rabbitmq`` runs it too)."""
    result: dict[str, Any] = {}
    hook_port = free_port()
    with (
        throwaway_database(args.backend, args.devices, args.postgresql_url) as database_url,
        tempfile.TemporaryDirectory(prefix="devicecontrol-bench-rabbitmq-") as directory,
        private_rabbitmq(f"http://127.0.0.1:{hook_port}", TOKEN) as node,
    ):
        provision(database_url, args.devices, Path(directory))
        hook_env = {
            **os.environ,
            "DEVICECONTROL_LOG_LEVEL": "warning",
            # the drain puts hundreds of readings per device on the queue at once: the
            # per-device rate limit (20/s by default) would drop them, not measure the link
            "DEVICECONTROL_DEVICE_MESSAGE_RATE": "1000000/1",
            "DEVICECONTROL_BROKER_HOOK_LISTEN": f"127.0.0.1:{hook_port}",
            "DEVICECONTROL_BROKER_HOOK_TOKEN": TOKEN,
            "DEVICECONTROL_AMQP_URL": (
                f"amqp://{LINK_USER}:{LINK_PASSWORD}@127.0.0.1:{node.amqp_port}/"
            ),
        }
        # the hook alone while the queues fill: no link reads them yet
        with serving(database_url, free_port(), hook_env, "--no-device-link"):
            asyncio.run(fill(node.amqp_port, args.readings, args.devices))
            result["ceiling: bare consumer drains msgs/s"] = asyncio.run(
                drain_ceiling(node.amqp_port, args.readings, args.devices)
            )
        before = asyncio.run(stored_readings(database_url))
        started = time.monotonic()
        with serving(database_url, free_port(), hook_env):
            drained_s = wait_stored(
                database_url, before + (args.readings // args.devices) * args.devices, 300
            )
            drained = (args.readings // args.devices) * args.devices
            result["link drains readings/s (incl. start)"] = drained / drained_s
            result["link start to stored all, s"] = time.monotonic() - started
            before = asyncio.run(stored_readings(database_url))
            begun = time.monotonic()
            sent = asyncio.run(over_mqtt(node.mqtt_port, args.devices, args.rate, args.seconds))
            sending_s = time.monotonic() - begun
            stored_meanwhile = asyncio.run(stored_readings(database_url)) - before
            lag = wait_stored(database_url, before + sent, 60)
            result["over MQTT: readings sent"] = sent
            result["over MQTT: stored/s while sending"] = stored_meanwhile / sending_s
            result["over MQTT: all stored after the last, s"] = lag
        # one link process, then two, each storing its shard (the hook on a serve of its own)
        with serving(database_url, free_port(), hook_env, "--no-device-link"):
            for links in (1, 2):
                rate, cores = links_drain(database_url, node.amqp_port, hook_env, links, args)
                result[f"{links} link(s) drain: stored/s"] = rate
                for who, used in cores.items():
                    result[f"{links} link(s) drain: cores, {who}"] = used
    result["2 links / 1 link"] = (
        result["2 link(s) drain: stored/s"] / result["1 link(s) drain: stored/s"]
    )
    result["link drain / ceiling"] = (
        result["link drains readings/s (incl. start)"]
        / result["ceiling: bare consumer drains msgs/s"]
    )
    return result


if __name__ == "__main__":
    main()
