"""python -m bench.events: the live events' fan-out under a fleet.

A real ``devicecontrol serve --workers 2`` on a throw-away database filled by
bench.provision (10,000 controllers, 1,000 users with tokens, each owning about ten, every
controller owned) with a device secret for every controller. All DEVICES devices connect
over raw MQTT sockets. Then, in one run:

1. readings flow at RATE a second for SECONDS with no stream open (the link's stored
   readings per second, the baseline);
2. every token holder opens its all-controllers stream (``GET /v1/controllers/events``,
   1,000 streams spread by the kernel over the two workers); then a second one each,
   idle, whose cost per stream is the workers' memory after less before, and which are
   closed again;
3. the same flow again, now with every reading owed to one stream: each stream's reader
   notes when each reading's event arrives.

Reported: publish-to-event latency (p50, p99; the device's publish and the stream's
read are timed by the same clock in this process), events received against readings
stored, stored readings per second with and without streams (and their ratio), memory per
idle open stream in the HTTP workers, and the service's CPU. The streams are read by
plain asyncio sockets (one task each), the devices are bench.devices' raw sockets.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiomqtt
import httpx
import msgspec
from sqlalchemy import update

from bench.brokers import mosquitto_broker
from bench.databases import DEFAULT_POSTGRESQL_URL, throwaway_database
from bench.devices import (
    SECRET,
    Device,
    connect_all,
    print_result,
    publish_for,
    quantile,
    service_cpu_s,
    stored_readings,
)
from bench.fleet import Fleet, serial_number
from bench.provision import provision
from bench.servers import free_port
from devicecontrol.database.engine import Database
from devicecontrol.database.tables import controllers
from devicecontrol.devices.identity import device_secret_digest

PUBLISHED: dict[int, float] = {}  # the reading's sequence number -> when it was published


class TimedDevice(Device):
    def publish(self, seq: int) -> None:
        super().publish(seq)
        PUBLISHED[seq] = time.perf_counter()


class StreamReader:
    """One all-controllers stream over a plain socket: the HTTP/1.1 request, then lines."""

    def __init__(self, port: int, token: str) -> None:
        self.port, self.token = port, token
        self.latencies: list[float] = []
        self.events = 0
        self.opened = asyncio.Event()

    async def run(self) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
        writer.write(
            b"GET /v1/controllers/events HTTP/1.1\r\nHost: bench\r\n"
            b"Authorization: Bearer " + self.token.encode() + b"\r\n\r\n"
        )
        status = await reader.readline()
        if b" 200 " not in status:
            raise SystemExit(f"a stream was refused: {status!r}")
        with contextlib.suppress(asyncio.CancelledError, ConnectionError):
            event = b""
            while True:
                line = await reader.readline()
                if not line:
                    return
                if line.startswith(b"event: "):
                    event = line[7:].strip()
                    self.opened.set()
                elif line.startswith(b"data: ") and event == b"reading":
                    arrived = time.perf_counter()
                    self.events += 1
                    power = msgspec.json.decode(line[6:])["reading"]["power"][0]
                    published = PUBLISHED.get(int(power))
                    if published is not None:
                        self.latencies.append(arrived - published)
        writer.close()


async def open_streams(readers: list[StreamReader]) -> list[asyncio.Task[None]]:
    """Open every reader's stream, a few at a time (each opening reads its controllers),
    and wait until each has had its opening events."""
    tasks = []
    for reader in readers:
        tasks.append(asyncio.create_task(reader.run()))
        if len(tasks) % 50 == 0:
            await asyncio.sleep(0.05)
    await asyncio.wait_for(asyncio.gather(*(r.opened.wait() for r in readers)), 60)
    return tasks


def workers_rss_bytes(serve: subprocess.Popen[bytes]) -> int:
    """The resident memory of serve's HTTP workers (not the parent, not the link)."""
    total = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == serve.pid:
            continue
        try:
            if os.getpgid(int(entry.name)) != serve.pid:
                continue
            if b"devicecontrol.devices.link.process" in (entry / "cmdline").read_bytes():
                continue
            for line in (entry / "status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
        except (OSError, ProcessLookupError):
            continue
    return total


async def flow(database_url: str, devices: list[Device], rate: float, seconds: float) -> float:
    """Readings at ``rate`` for ``seconds``; stored per second (counted 3 s after)."""
    before = await stored_readings(database_url)
    await publish_for(devices, rate, seconds)
    await asyncio.sleep(3)
    return (await stored_readings(database_url) - before) / seconds


async def measure(
    base_url: str, port: int, mqtt_port: int, serve: subprocess.Popen[bytes], tokens: list[str],
    args: argparse.Namespace,
) -> dict[str, object]:  # fmt: skip
    devices: list[Device] = [
        TimedDevice(n, mqtt_port, serial_number(n)) for n in range(args.devices)
    ]
    connect_s = await connect_all(devices)
    acks = [asyncio.create_task(d.read_acks()) for d in devices]
    await asyncio.sleep(3)  # online written
    without = await flow(args.database_url, devices, args.rate, args.seconds)

    readers = [StreamReader(port, token) for token in tokens[: args.streams]]
    extra = [StreamReader(port, token) for token in tokens[: args.streams]]
    tasks = await open_streams(readers)
    await asyncio.sleep(2)
    rss_before = workers_rss_bytes(serve)
    # the marginal cost of an idle stream: as many again (a second stream of each user),
    # once what the first ones warmed up (pools, caches, the hub's indexes) is in place;
    # closed again before the flow, which runs with one stream per user
    extra_tasks = await open_streams(extra)
    await asyncio.sleep(2)
    rss_after = workers_rss_bytes(serve)
    for task in extra_tasks:
        task.cancel()
    await asyncio.sleep(2)

    PUBLISHED.clear()
    cpu_before = service_cpu_s(serve)
    stored_before = await stored_readings(args.database_url)
    with_streams = await flow(args.database_url, devices, args.rate, args.seconds)
    stored = await stored_readings(args.database_url) - stored_before
    service_cpu = (service_cpu_s(serve) - cpu_before) / (args.seconds + 3)
    for task in tasks + acks:
        task.cancel()
    latencies = [x for r in readers for x in r.latencies]
    received = sum(r.events for r in readers)
    return {
        "backend": args.backend,
        "devices": args.devices,
        "streams": len(readers),
        "workers": 2,
        "connect_s": connect_s,
        "offered_per_s": args.rate,
        "stored_per_s_without_streams": without,
        "stored_per_s_with_streams": with_streams,
        "stored_ratio": with_streams / without if without else 0.0,
        "reading_events_received": received,
        "readings_stored": stored,
        "publish_to_event_p50_ms": quantile(latencies, 0.5) * 1000,
        "publish_to_event_p99_ms": quantile(latencies, 0.99) * 1000,
        "publish_to_event_max_ms": max(latencies, default=0.0) * 1000,
        "bytes_per_idle_stream": (rss_after - rss_before) / max(1, len(extra)),
        "service_cpu_cores": service_cpu,
    }


async def mosquitto_ceiling(args: argparse.Namespace) -> dict[str, object]:
    """The same devices and flow against Mosquitto pushing every reading to one
    subscriber: the publish-to-delivery time of a broker that only moves bytes, on this
    machine, in this run (the service adds the commit, the log's read and the stream)."""
    PUBLISHED.clear()
    async with mosquitto_broker() as port:
        devices: list[Device] = [
            TimedDevice(n, port, serial_number(n)) for n in range(args.devices)
        ]
        await connect_all(devices)
        acks = [asyncio.create_task(d.read_acks()) for d in devices]
        latencies: list[float] = []
        async with aiomqtt.Client("127.0.0.1", port, identifier="bench-ceiling") as subscriber:
            await subscriber.subscribe("devices/+/state", qos=1)

            async def receive() -> None:
                async for message in subscriber.messages:
                    arrived = time.perf_counter()
                    assert isinstance(message.payload, bytes)
                    power = msgspec.json.decode(message.payload)["power"][0]
                    published = PUBLISHED.get(int(power))
                    if published is not None:
                        latencies.append(arrived - published)

            receiver = asyncio.create_task(receive())
            await publish_for(devices, args.rate, args.seconds)
            await asyncio.sleep(3)
            receiver.cancel()
        for task in acks:
            task.cancel()
        for device in devices:
            device.drop()
    return {
        "ceiling": "mosquitto, one subscriber",
        "ceiling_delivered": len(latencies),
        "ceiling_publish_to_delivery_p50_ms": quantile(latencies, 0.5) * 1000,
        "ceiling_publish_to_delivery_p99_ms": quantile(latencies, 0.99) * 1000,
    }


async def fill(database_url: str, devices: int) -> list[str]:
    """The fleet, and a device secret for every controller; one token per holder."""
    provisioned = await provision(database_url, Fleet(devices))
    database = Database(database_url)
    try:
        async with database.write() as connection:
            await connection.execute(
                update(controllers).values(device_secret_digest=device_secret_digest(SECRET))
            )
    finally:
        await database.dispose()
    return [held[0] for _, held in sorted(provisioned.access_tokens.items())]


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.events", description=__doc__)
    parser.add_argument("--devices", type=int, default=10_000)
    parser.add_argument("--streams", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=1000, help="readings a second, in all")
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--backend", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--postgresql-url", default=DEFAULT_POSTGRESQL_URL)
    parser.add_argument("--serve-log", help="serve's log (warnings and errors), to this file")
    parser.add_argument("--no-ceiling", dest="ceiling", action="store_false")
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory(prefix="devicecontrol-bench-events-"),
        throwaway_database(args.backend, args.devices, args.postgresql_url) as database_url,
    ):
        args.database_url = database_url
        tokens = asyncio.run(fill(database_url, args.devices))
        port, mqtt_port = free_port(), free_port()
        env = {
            **os.environ,
            "DEVICECONTROL_LOG_LEVEL": "warning",
            "DEVICECONTROL_MQTT_LISTEN": f"127.0.0.1:{mqtt_port}",
        }
        serve_log = open(args.serve_log, "wb") if args.serve_log else subprocess.DEVNULL  # noqa: SIM115
        serve = subprocess.Popen(  # noqa: S603 (our own CLI, fixed arguments)
            [sys.executable, "-m", "devicecontrol", "serve", "--port", str(port),
             "--workers", "2", "--database-url", database_url],
            env=env, stdout=subprocess.DEVNULL, stderr=serve_log,
            start_new_session=True,
        )  # fmt: skip
        try:
            base_url = f"http://127.0.0.1:{port}"
            for _ in range(100):
                with contextlib.suppress(httpx.TransportError):
                    httpx.get(f"{base_url}/healthz", timeout=1)
                    break
                time.sleep(0.1)
            result = asyncio.run(measure(base_url, port, mqtt_port, serve, tokens, args))
        finally:
            os.killpg(serve.pid, 15)
            serve.wait(timeout=60)
    if args.ceiling:
        result.update(asyncio.run(mosquitto_ceiling(args)))
    print_result(result, width=32, decimals=2)


if __name__ == "__main__":
    main()
