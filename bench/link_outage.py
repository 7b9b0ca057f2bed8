"""python -m bench.link_outage: nothing a broker acknowledged is lost when a link dies.

For Mosquitto and RabbitMQ, one link process and two shards, on SQLite and PostgreSQL:
DEVICES devices (real MQTT clients, ``tests/devices/link/behaviour/fleets.py``) report at
a quarter of the rate a device is allowed (the default 20 a second: 5 a second each) while
the last link process is SIGKILLed for DOWN_S seconds and started again. Each reading the
broker acknowledged (QoS 1) is counted; the table compares them with the readings stored
once the link has caught up, and says how long the catching up took after its start.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from bench.databases import DEFAULT_POSTGRESQL_URL, throwaway_database
from tests.devices.link.behaviour.fleets import (
    HOOK_TOKEN,
    Fleet,
    RabbitWorld,
    fleet_of,
    send,
    stored_count,
)
from tests.mosquitto import dynsec_mosquitto
from tests.processes import free_port
from tests.rabbitmq import private_rabbitmq

RATE_PER_S = 20  # the service's default
CATCH_UP_WITHIN_S = 60.0


async def outage(fleet: Fleet, devices: int, down_s: float) -> dict[str, float]:
    serials = [f"OUT-{n:03d}" for n in range(devices)]
    fleet.provision(*serials)
    sent = dict.fromkeys(serials, 0)
    stop = asyncio.Event()

    async def report(serial: str) -> None:
        async with fleet.device(serial) as plug:
            while not stop.is_set():
                await send(plug, serial, sent[serial])
                sent[serial] += 1
                await asyncio.sleep(4 / RATE_PER_S)  # a quarter of the rate

    reporters = [asyncio.create_task(report(serial)) for serial in serials]
    await asyncio.sleep(2.0)
    fleet.kill(fleet.shards - 1)
    await asyncio.sleep(down_s)
    fleet.start(fleet.shards - 1)
    started = time.monotonic()
    await asyncio.sleep(1.0)
    stop.set()
    await asyncio.gather(*reporters)
    acknowledged = sum(sent.values())
    stored = 0
    while time.monotonic() - started < CATCH_UP_WITHIN_S:
        stored = sum([await stored_count(fleet, serial) for serial in serials])
        if stored >= acknowledged:
            break
        await asyncio.sleep(0.5)
    dropped = _dropped(fleet)
    return {
        "dropped by the link": dropped,
        "acknowledged": acknowledged,
        "stored": stored,
        "lost": acknowledged - stored,
        "caught up (s)": time.monotonic() - started,
    }


def _dropped(fleet: Fleet) -> float:
    """The device messages the running links dropped, whatever the reason (their /metrics)."""
    total = 0.0
    for server in fleet.links:
        if server is None:
            continue
        page = httpx.get(f"{server.base_url}/metrics", timeout=10).text
        for line in page.splitlines():
            if line.startswith("devicecontrol_device_messages_dropped_total{"):
                total += float(line.rpartition(" ")[2])
    return total


def migrated(database_url: str) -> None:
    subprocess.run(  # noqa: S603 (our own CLI, fixed arguments)
        [sys.executable, "-m", "devicecontrol", "db", "upgrade", "--database-url", database_url],
        check=True,
        capture_output=True,
    )


def run(args: argparse.Namespace) -> list[tuple[str, dict[str, float]]]:
    rows = []
    hook_port = free_port()
    with private_rabbitmq(f"http://127.0.0.1:{hook_port}", HOOK_TOKEN, management=True) as node:
        rabbit = RabbitWorld(node, hook_port)
        for backend in args.databases:
            for kind in args.brokers:
                for shards in args.links:
                    with (
                        throwaway_database(backend, shards, args.postgresql_url) as url,
                        tempfile.TemporaryDirectory(prefix="devicecontrol-outage-") as tmp,
                    ):
                        migrated(url)
                        workdir = Path(tmp)
                        if kind == "mosquitto":
                            with (
                                dynsec_mosquitto(workdir / "mosquitto") as broker,
                                fleet_of(
                                    kind, shards, database_url=url, workdir=workdir,
                                    mosquitto=broker, rate_per_s=RATE_PER_S,
                                ) as fleet,
                            ):  # fmt: skip
                                result = asyncio.run(outage(fleet, args.devices, args.down))
                        else:
                            with fleet_of(
                                kind, shards, database_url=url, workdir=workdir,
                                rabbit=rabbit, rate_per_s=RATE_PER_S,
                            ) as fleet:  # fmt: skip
                                result = asyncio.run(outage(fleet, args.devices, args.down))
                    name = f"{kind}, {shards} link(s), {backend}"
                    print(name, result, flush=True)
                    rows.append((name, result))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.link_outage", description=__doc__)
    parser.add_argument("--devices", type=int, default=15)
    parser.add_argument("--down", type=float, default=10.0, help="seconds the link is dead")
    parser.add_argument("--postgresql-url", default=DEFAULT_POSTGRESQL_URL)
    parser.add_argument("--brokers", nargs="+", default=["mosquitto", "rabbitmq"])
    parser.add_argument("--links", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--databases", nargs="+", default=["sqlite", "postgresql"])
    args = parser.parse_args()
    rows = run(args)
    print(f"\n{args.devices} devices at {RATE_PER_S // 4}/s, the last link SIGKILLed {args.down} s")
    print("| broker, links, database | acknowledged | stored | lost | caught up after start (s) |")
    print("|---|---|---|---|---|")
    for name, r in rows:
        print(
            f"| {name} | {r['acknowledged']:.0f} | {r['stored']:.0f} | {r['lost']:.0f} "
            f"| {r['caught up (s)']:.1f} |"
        )


if __name__ == "__main__":
    main()
