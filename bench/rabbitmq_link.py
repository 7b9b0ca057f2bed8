"""python -m bench.rabbitmq_link: readings stored a second by the device link on RabbitMQ.

A private RabbitMQ node (tests/rabbitmq.py) whose MQTT plugin asks the broker hook, a real
``devicecontrol serve`` running the hook and the link (``DEVICECONTROL_AMQP_URL``), and
DEVICES devices as real MQTT clients publishing RATE readings a second in all, at QoS 1,
for SECONDS. Measured: the readings stored a second while they publish, and how long after
the last one the link had stored everything.

The ceiling, in the same run: RabbitMQ's own, a bare AMQP consumer (aio-pika) acknowledging
every message of the same devices on a queue of its own, with no database.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import aio_pika
import aiomqtt

from bench.databases import DEFAULT_POSTGRESQL_URL, throwaway_database
from bench.devices import SECRET, print_result, provision, serial, serving, stored_readings
from bench.servers import free_port
from tests.rabbitmq import private_rabbitmq

TOKEN = "bench-hook-token-not-for-production-0123456789"  # noqa: S105 (benchmark data only)
LINK_USER, LINK_PASSWORD = "devicecontrol-link", "bench-link-password-0123456789"
READING = b'{"relay_state": "on", "power": [12.5]}'


async def publish(port: int, devices: int, rate: float, seconds: float) -> int:
    """Every device connected, then RATE readings a second in all; how many were sent."""
    clients = [
        aiomqtt.Client("127.0.0.1", port, identifier=serial(n), username=serial(n),
                       password=SECRET, protocol=aiomqtt.ProtocolVersion.V311, timeout=30)
        for n in range(devices)
    ]  # fmt: skip
    for client in clients:
        await client.__aenter__()
    interval = devices / rate  # each device's
    sent = 0

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
    sent = sum(counts)
    for client in clients:
        await client.__aexit__(None, None, None)
    return sent


async def ceiling(amqp_port: int, mqtt_port: int, args: argparse.Namespace) -> float:
    """RabbitMQ alone: a bare consumer's messages a second at the same offered rate."""
    connection = await aio_pika.connect(
        host="127.0.0.1", port=amqp_port, login=LINK_USER, password=LINK_PASSWORD
    )
    received = 0
    async with connection:
        channel = await connection.channel()
        queue = await channel.declare_queue("devicecontrol.bench", exclusive=True)
        await queue.bind("amq.topic", "devices.*.state")

        async def take(message: Any) -> None:
            nonlocal received
            received += 1
            await message.ack()

        await queue.consume(take)
        started = time.monotonic()
        await publish(mqtt_port, args.devices, args.rate, args.seconds)
        return received / (time.monotonic() - started)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.rabbitmq_link", description=__doc__)
    parser.add_argument("--backend", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--postgresql-url", default=DEFAULT_POSTGRESQL_URL)
    parser.add_argument("--devices", type=int, default=200)
    parser.add_argument("--rate", type=float, default=1000, help="readings a second, in all")
    parser.add_argument("--seconds", type=float, default=15)
    args = parser.parse_args()
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
            "DEVICECONTROL_BROKER_HOOK_LISTEN": f"127.0.0.1:{hook_port}",
            "DEVICECONTROL_BROKER_HOOK_TOKEN": TOKEN,
            # the account the ceiling's consumer logs in with, as the link's
            "DEVICECONTROL_AMQP_URL": f"amqp://{LINK_USER}:{LINK_PASSWORD}@127.0.0.1:1/",
        }
        with serving(database_url, free_port(), hook_env, "--no-device-link"):
            result["ceiling: bare consumer msgs/s"] = asyncio.run(
                ceiling(node.amqp_port, node.mqtt_port, args)
            )
        link_env = {
            **hook_env,
            "DEVICECONTROL_AMQP_URL": (
                f"amqp://{LINK_USER}:{LINK_PASSWORD}@127.0.0.1:{node.amqp_port}/"
            ),
        }
        with serving(database_url, free_port(), link_env):
            before = asyncio.run(stored_readings(database_url))
            started = time.monotonic()
            sent = asyncio.run(publish(node.mqtt_port, args.devices, args.rate, args.seconds))
            sending_s = time.monotonic() - started
            stored_while = asyncio.run(stored_readings(database_url)) - before
            while asyncio.run(stored_readings(database_url)) - before < sent:
                if time.monotonic() - started > sending_s + 60:
                    break
                time.sleep(0.1)
            result["readings sent"] = sent
            result["readings stored"] = asyncio.run(stored_readings(database_url)) - before
            result["stored/s while sending"] = stored_while / sending_s
            result["all stored after the last, s"] = time.monotonic() - started - sending_s
    result["stored/s / ceiling"] = (
        result["stored/s while sending"] / result["ceiling: bare consumer msgs/s"]
    )
    print(f"backend {args.backend}, {args.devices} devices, {args.rate:g} readings/s offered")
    print_result(result, width=32, decimals=2)


if __name__ == "__main__":
    main()
