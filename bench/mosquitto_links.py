"""python -m bench.mosquitto_links: one link process against two on Mosquitto.

A private Mosquitto with the fleet's accounts (``bench/fleet_mosquitto.py``) and PostgreSQL.
For one link and then two (``DEVICECONTROL_LINK_SHARD`` 0/1, then 0/2 and 1/2), each in a
``devicecontrol serve`` of its own:

1. the links start, make their persistent sessions (members of the shared subscriptions
   when there are two) and are killed (SIGKILL: a dead link stays a member of the group,
   and Mosquitto keeps its share for it);
2. DEVICES devices (raw MQTT sockets, ``bench/devices.py``) publish READINGS readings,
   which Mosquitto queues in the sessions;
3. the links start again and drain them: the readings stored a second from the start of
   their processes to the last one stored, and the CPU the links, PostgreSQL and
   Mosquitto used over that span.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.databases import DEFAULT_POSTGRESQL_URL, throwaway_database
from bench.devices import (
    ANSWERING,
    SECRET,
    Device,
    connect_all,
    link_pid,
    print_result,
    provision,
    publish_for,
    serial,
    stored_readings,
)
from bench.fleet_mosquitto import fleet_mosquitto
from bench.rabbitmq_link import cpu_seconds, wait_stored
from bench.servers import free_port

SETTLE_S = 3.0  # a link's first connect and subscriptions
FILL_RATE = 5000.0  # readings a second offered while the links are away
CPU_USERS = {
    "links": b"devicecontrol.devices.link.process",
    "PostgreSQL": b"postgres",
    "Mosquitto": b"mosquitto",
}


def link_environments(env: dict[str, str], links: int) -> list[dict[str, str]]:
    return [{**env, "DEVICECONTROL_LINK_SHARD": f"{i}/{links}"} for i in range(links)]


def start_serve(database_url: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(  # noqa: S603 (our own CLI, fixed arguments)
        [sys.executable, "-m", "devicecontrol", "serve", "--port", str(free_port()),
         "--database-url", database_url],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip


def make_sessions(database_url: str, environments: list[dict[str, str]]) -> None:
    """Each link's persistent session made, then its whole ``serve`` killed (a link stopped
    cleanly would leave the group, and its supervisor would restart a link killed alone):
    the sessions stay, and so do their places in the group."""
    serves = [start_serve(database_url, shard) for shard in environments]
    time.sleep(SETTLE_S)
    for serve in serves:
        link_pid(serve)  # running, or the bench stops here
        os.killpg(serve.pid, signal.SIGKILL)
        serve.wait(timeout=30)


async def fill(port: int, devices: int, readings: int) -> int:
    """READINGS readings from DEVICES devices, every PUBACK (Mosquitto's) waited for."""
    fleet = [Device(n, port) for n in range(devices)]
    await connect_all(fleet)
    readers = [asyncio.create_task(device.read_acks()) for device in fleet]
    sent = await publish_for(fleet, FILL_RATE, readings / FILL_RATE)
    while any(device.sent for device in fleet):  # noqa: ASYNC110 (PUBACKs pop them)
        await asyncio.sleep(0.05)
    for device in fleet:
        device.drop()
    await asyncio.gather(*readers, return_exceptions=True)
    return sent


def drain(
    database_url: str, port: int, env: dict[str, str], links: int, args: argparse.Namespace
) -> dict[str, Any]:
    """LINKS links' drain of readings queued for them while they were away: from the start
    of their ``serve`` processes to the last reading stored (a link holds a replay until
    its session has settled who is online, so a rate from its first commit would leave out
    the work before it), and the cores each kind of process used over the same span."""
    environments = link_environments(env, links)
    make_sessions(database_url, environments)
    before = asyncio.run(stored_readings(database_url))
    sent = asyncio.run(fill(port, args.devices, args.readings))
    began, cpu_before = time.monotonic(), cpu_seconds(CPU_USERS)
    serves = [start_serve(database_url, shard) for shard in environments]
    try:
        wait_stored(database_url, before + sent, 300)
        span, cpu_after = time.monotonic() - began, cpu_seconds(CPU_USERS)
        complete = asyncio.run(stored_readings(database_url)) - before == sent
    finally:
        for serve in serves:
            os.killpg(serve.pid, signal.SIGTERM)
            serve.wait(timeout=30)
    result: dict[str, Any] = {f"{links} link(s): stored/s, start included": sent / span}
    for who in CPU_USERS:
        result[f"{links} link(s): cores, {who}"] = (cpu_after[who] - cpu_before[who]) / span
    result[f"{links} link(s): every reading stored"] = complete
    return result


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.mosquitto_links", description=__doc__)
    parser.add_argument("--postgresql-url", default=DEFAULT_POSTGRESQL_URL)
    parser.add_argument("--devices", type=int, default=200)
    parser.add_argument("--readings", type=int, default=120_000, help="queued for the drain")
    args = parser.parse_args()
    result: dict[str, Any] = {}
    with (
        throwaway_database("postgresql", args.devices, args.postgresql_url) as database_url,
        tempfile.TemporaryDirectory(prefix="devicecontrol-bench-mosquitto-links-") as directory,
    ):
        workdir = Path(directory)
        provision(database_url, args.devices, workdir)
        port = free_port()
        serials = [serial(n) for n in range(args.devices + ANSWERING)]
        with fleet_mosquitto(workdir, port, serials, SECRET) as broker:
            env = {
                **os.environ,
                "DEVICECONTROL_LOG_LEVEL": "warning",
                # hundreds of readings per device queued at once: the per-device rate limit
                # (20/s by default) would drop them, not measure the links
                "DEVICECONTROL_DEVICE_MESSAGE_RATE": "1000000/1",
                "DEVICECONTROL_MQTT_URL": broker.url,
            }
            for links in (1, 2):
                result.update(drain(database_url, port, env, links, args))
    rates = [result[f"{links} link(s): stored/s, start included"] for links in (1, 2)]
    result["2 links / 1 link"] = rates[1] / rates[0]
    print(f"PostgreSQL, {args.devices} devices, {args.readings:,} readings queued per run")
    print_result(result, width=36, decimals=2)


if __name__ == "__main__":
    main()
