"""python -m bench.brokers: message throughput of amqtt's general broker against Mosquitto.

The device link's broker choice (docs/DESIGN.md), measured: a plain amqtt broker (no
plugins, the library's own cost), and Mosquitto from Debian's package, each on a free
loopback port with a configuration of its own. DEVICES clients each publish MESSAGES
readings at QoS 1 while one subscriber receives them all; the rate is messages delivered
per second of wall time, and the same run measures both. The service's own link adds its
checks and a database write per reading on top; that path is what the HTTP bench and the
suite measure.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiomqtt
from amqtt.broker import Broker


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.asynccontextmanager
async def amqtt_broker() -> AsyncIterator[int]:
    port = _free_port()
    broker = Broker(
        {
            "listeners": {"default": {"type": "tcp", "bind": f"127.0.0.1:{port}"}},
            "plugins": {
                "amqtt.plugins.authentication.AnonymousAuthPlugin": {"allow_anonymous": True}
            },
        }
    )
    await broker.start()
    try:
        yield port
    finally:
        await broker.shutdown()


@contextlib.asynccontextmanager
async def mosquitto_broker() -> AsyncIterator[int]:
    port = _free_port()
    with tempfile.TemporaryDirectory() as workdir:
        config = Path(workdir) / "mosquitto.conf"
        config.write_text(
            f"listener {port} 127.0.0.1\nallow_anonymous true\npersistence false\n"
            "max_queued_messages 0\nmax_inflight_messages 0\n"
        )
        binary = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
        process = await asyncio.create_subprocess_exec(
            binary, "-c", str(config), stderr=subprocess.DEVNULL
        )
        try:
            for _ in range(100):
                with contextlib.suppress(OSError):
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                await asyncio.sleep(0.05)
            yield port
        finally:
            process.terminate()
            await asyncio.wait_for(process.wait(), 10)


async def throughput(port: int, devices: int, messages: int) -> tuple[float, int]:
    """Messages delivered to the subscriber per second, and how many never arrived."""
    expected = devices * messages
    async with aiomqtt.Client("127.0.0.1", port, identifier="bench-service") as service:
        await service.subscribe("devices/+/state", qos=1)
        received = 0

        async def receive() -> None:
            nonlocal received
            async for _ in service.messages:
                received += 1
                if received == expected:
                    return

        async def device(number: int) -> None:
            async with aiomqtt.Client("127.0.0.1", port, identifier=f"D{number}") as client:
                for _ in range(messages):
                    await client.publish(f"devices/D{number}/state", b'{"temp": 21.5}', qos=1)

        started = time.perf_counter()
        receiver = asyncio.create_task(receive())
        await asyncio.gather(*(device(n) for n in range(devices)))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(receiver, 30)
        return received / (time.perf_counter() - started), expected - received


async def main(devices: int, messages: int, rounds: int) -> None:
    results: dict[str, list[tuple[float, int]]] = {"amqtt (embedded)": [], "mosquitto": []}
    for _ in range(rounds):  # alternated, as the HTTP bench does
        async with amqtt_broker() as port:
            results["amqtt (embedded)"].append(await throughput(port, devices, messages))
        async with mosquitto_broker() as port:
            results["mosquitto"].append(await throughput(port, devices, messages))
    ceiling = max(rate for rate, _ in results["mosquitto"])
    print(f"{devices} devices x {messages} QoS 1 readings, best of {rounds}:")
    for name, runs in results.items():
        rate, lost = max(runs)
        print(f"  {name:18} {rate:8,.0f} msg/s  ({rate / ceiling:.2f} of mosquitto), {lost} lost")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, default=50)
    parser.add_argument("--messages", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    arguments = parser.parse_args()
    asyncio.run(main(arguments.devices, arguments.messages, arguments.rounds))
