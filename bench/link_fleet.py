"""python -m bench.link_fleet: as many devices as one link process has files for.

A real ``devicecontrol serve`` (the embedded endpoint, one link process) on a throw-away
database provisioned with ``controllers import``. DEVICES devices on raw MQTT sockets,
spread over GENERATORS processes, each connecting from an address of its own (127.0.0.2
and up: each has its own ephemeral ports, and no process nears its own file limit).

Four phases, each measured:

1. **connect**: every device connects (CONNECTS_AT_ONCE at a time in each generator),
   while an app's controller reads are timed in a process of their own, against the same
   reads while calm;
2. **idle**: the link process's memory per connected device, and the machine's;
3. **flow**: RATE QoS 1 readings a second in all for SECONDS, with commands made one
   after another with ``?wait=5`` beside them (bench/devices.py's answering devices):
   every reading stored, the command round trip;
4. **link restart**: the link process killed (SIGKILL; ``serve`` starts it again), every
   device reconnecting as soon as it can, reads timed meanwhile: how long until every
   device is ``online`` in the database again, and the reads' p99 against the calm.

The figures and the command that gave them are in docs/PERFORMANCE.md ("Toward 100,000
devices").
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing
import os
import resource
import signal
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import func, select

from bench.devices import (
    ANSWERING,
    CLOCK_TICKS,
    AnsweringDevice,
    Device,
    add_fleet_arguments,
    command_round_trips,
    connect_all,
    dropped_messages,
    link_pid,
    link_rss_bytes,
    login,
    print_result,
    provisioned_fleet,
    publish_for,
    quantile,
    quantile_fine,
    serving,
    stored_readings,
    timed_reads,
)
from devicecontrol.database.engine import Database
from devicecontrol.database.tables import controllers

GENERATORS = 4
CONNECTS_AT_ONCE = 100  # in each generator
GENERATOR_NICENESS = 10
PINGREQ = b"\xc0\x00"  # the PINGRESPs are read (and ignored) by each device's reader
PING_SECONDS = 10.0
RECONNECT_EVERY_S = 0.5  # a device whose connection was refused tries again after this
IDLE_S = 5.0  # the link's CPU with every device connected and quiet


# --- the generators: each a process holding its share of the devices -------------------------


def generator(index: int, port: int, first: int, count: int, pipe: Connection) -> None:
    """One generator process: does what the pipe says, answers with what it measured."""
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    # the devices are other machines: on this one they take the CPU the service leaves
    os.nice(GENERATOR_NICENESS)
    asyncio.run(_generate(f"127.0.0.{2 + index}", port, first, count, pipe))


async def _generate(source: str, port: int, first: int, count: int, pipe: Connection) -> None:
    loop = asyncio.get_running_loop()
    devices = [Device(n, port, source=source) for n in range(first, first + count)]
    readers: list[asyncio.Task[None]] = []
    while True:
        order, argument = await loop.run_in_executor(None, pipe.recv)
        if order == "connect":
            pipe.send(await connect_all(devices, CONNECTS_AT_ONCE))
            readers = [asyncio.create_task(d.read_acks()) for d in devices]
        elif order == "publish":
            rate, seconds = argument
            sent = await publish_for(devices, rate, seconds)
            await asyncio.sleep(3)  # the last PUBACKs
            pipe.send((sent, [x for d in devices for x in d.latencies]))
        elif order == "ping":  # one PINGREQ each, spread over ``argument`` seconds
            began = time.perf_counter()
            for n, device in enumerate(devices):
                assert device.writer is not None
                device.writer.write(PINGREQ)
                ahead = began + argument * n / len(devices) - time.perf_counter()
                if ahead > 0.005:
                    await asyncio.sleep(ahead)
            await asyncio.sleep(1)
            pipe.send(len(devices))
        elif order == "reconnect":  # the link is gone: every socket ends; connect again
            await asyncio.gather(*readers, return_exceptions=True)
            began = time.perf_counter()
            await asyncio.gather(*(_until_connected(d) for d in devices))
            pipe.send(time.perf_counter() - began)
        else:
            for device in devices:
                device.drop()
            return


async def _until_connected(device: Device) -> None:
    while True:
        try:
            await device.connect()
            return
        except (OSError, asyncio.IncompleteReadError):
            await asyncio.sleep(RECONNECT_EVERY_S)


class Generators:
    """The generator processes, ordered all at once; their answers, in order."""

    def __init__(self, port: int, devices: int, count: int) -> None:
        context = multiprocessing.get_context("spawn")
        self.pipes: list[Connection] = []
        self.processes = []
        share = -(-devices // count)
        for index in range(count):
            first = index * share
            mine, theirs = context.Pipe()
            process = context.Process(
                target=generator, args=(index, port, first, min(share, devices - first), theirs)
            )
            process.start()
            self.pipes.append(mine)
            self.processes.append(process)

    async def order(self, order: str, argument: object = None) -> list[Any]:
        for pipe in self.pipes:
            pipe.send((order, argument))
        loop = asyncio.get_running_loop()
        answers = [loop.run_in_executor(None, pipe.recv) for pipe in self.pipes]
        return list(await asyncio.gather(*answers))

    def stop(self) -> None:
        for pipe in self.pipes:
            with contextlib.suppress(OSError):
                pipe.send(("stop", None))
        for process in self.processes:
            process.join(timeout=30)


# --- the measurement ------------------------------------------------------------------------


def link_cpu_s(serve: Any) -> float:
    """CPU seconds the link process has used (utime + stime)."""
    fields = (Path("/proc") / str(link_pid(serve)) / "stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def available_memory_bytes() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return 0


async def online_count(database_url: str) -> int:
    database = Database(database_url)
    try:
        async with database.read() as connection:
            query = select(func.count()).select_from(controllers).where(controllers.c.online)
            return int((await connection.execute(query)).scalar_one())
    finally:
        await database.dispose()


async def until_online(database_url: str, devices: int, within_s: float) -> float:
    """Seconds until at least ``devices`` controllers are online (NaN if not within)."""
    began = time.perf_counter()
    while time.perf_counter() - began < within_s:
        if await online_count(database_url) >= devices:
            return time.perf_counter() - began
        await asyncio.sleep(0.5)
    return float("nan")


def p99_ms(times: list[float]) -> float:
    return quantile(times, 0.99) * 1000


async def measure(base_url: str, mqtt_port: int, serve: Any, args: argparse.Namespace) -> dict:
    workdir = Path(args.workdir)
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        headers = await login(http)
    generators = Generators(mqtt_port, args.devices, args.generators)
    try:
        async with timed_reads(base_url, headers, args.devices, workdir) as calm:
            await asyncio.sleep(5)
        rss_before, memory_before = link_rss_bytes(serve), available_memory_bytes()
        cpu_before = link_cpu_s(serve)
        async with timed_reads(base_url, headers, args.devices, workdir) as during_connect:
            connect_s = max(await generators.order("connect"))
        online_s = await until_online(args.database_url, args.devices, 60)
        connect_cpu = link_cpu_s(serve) - cpu_before
        await asyncio.sleep(2)  # idle
        cpu_before = link_cpu_s(serve)
        await asyncio.sleep(IDLE_S)
        idle_cpu = link_cpu_s(serve) - cpu_before
        rss_after, memory_after = link_rss_bytes(serve), available_memory_bytes()

        answering = []
        for n in range(args.devices, args.devices + ANSWERING):
            answerer = AnsweringDevice(n, mqtt_port)
            await answerer.connect()
            answering.append(asyncio.create_task(answerer.answer()))
        await asyncio.sleep(0.5)  # subscribed
        stored_before = await stored_readings(args.database_url)
        cpu_before = link_cpu_s(serve)
        flow = asyncio.create_task(
            generators.order("publish", (args.rate / args.generators, args.seconds))
        )
        round_trips, commands_failed = await command_round_trips(
            base_url, headers, args.devices, args.seconds
        )
        published = await flow  # its 3 s for the last PUBACKs included
        flow_cpu = link_cpu_s(serve) - cpu_before
        await asyncio.sleep(2)
        stored = await stored_readings(args.database_url) - stored_before
        sent = sum(s for s, _ in published)
        latencies = [x for _, some in published for x in some]
        dropped = await dropped_messages(base_url)
        for task in answering:
            task.cancel()
        cpu_before = link_cpu_s(serve)
        pinged = sum(await generators.order("ping", PING_SECONDS))
        ping_cpu = link_cpu_s(serve) - cpu_before - idle_cpu * (PING_SECONDS + 1) / IDLE_S

        async with timed_reads(base_url, headers, args.devices, workdir) as during_restart:
            os.kill(link_pid(serve), signal.SIGKILL)
            reconnect_s = max(await generators.order("reconnect"))
            back_online_s = await until_online(args.database_url, args.devices, 120)
    finally:
        generators.stop()
    return {
        "backend": args.backend,
        "devices": args.devices,
        "generators": f"{args.generators} processes, 127.0.0.2-127.0.0.{1 + args.generators}",
        "connect_s": connect_s,
        "all_online_after_s": online_s,
        "http_calm_p99_ms": p99_ms(calm),
        "http_during_connect_p99_ms": p99_ms(during_connect),
        "http_connect_over_calm_p99": quantile(during_connect, 0.99) / quantile(calm, 0.99),
        "link_bytes_per_idle_device": (rss_after - rss_before) / args.devices,
        "link_rss_mb": rss_after / 2**20,
        "machine_memory_used_by_fleet_mb": (memory_before - memory_after) / 2**20,
        "link_cpu_ms_per_connect": connect_cpu * 1000 / args.devices,
        "link_cpu_idle_cores": idle_cpu / IDLE_S,
        "link_cpu_ms_per_ping": ping_cpu * 1000 / pinged,
        "offered_per_s": sent / args.seconds,
        "stored_per_s": stored / args.seconds,
        "sent": sent,
        "acknowledged": len(latencies),
        "stored": stored,
        "device_messages_dropped": ", ".join(f"{k} {v:.0f}" for k, v in dropped.items()) or "0",
        "link_cpu_ms_per_reading": flow_cpu * 1000 / max(stored, 1),
        "puback_p50_ms": quantile(latencies, 0.5) * 1000,
        "puback_p99_ms": quantile(latencies, 0.99) * 1000,
        "commands": len(round_trips),
        "commands_failed": commands_failed,
        "round_trip_p50_ms": quantile(round_trips, 0.5) * 1000,
        "round_trip_p99_ms": p99_ms(round_trips),
        "round_trip_max_ms": quantile_fine(round_trips, 1.0) * 1000,
        "restart_reconnect_s": reconnect_s,
        "restart_all_online_s": back_online_s,
        "http_during_restart_p99_ms": p99_ms(during_restart),
        "http_restart_over_calm_p99": quantile(during_restart, 0.99) / quantile(calm, 0.99),
    }


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.link_fleet", description=__doc__)
    add_fleet_arguments(parser, devices=19_000)
    parser.add_argument("--generators", type=int, default=GENERATORS)
    args = parser.parse_args()
    with provisioned_fleet(args, "devicecontrol-bench-fleet-") as (port, mqtt_port):
        env = {
            **os.environ,
            "DEVICECONTROL_LOG_LEVEL": "warning",
            "DEVICECONTROL_MQTT_LISTEN": f"127.0.0.1:{mqtt_port}",
        }
        with serving(args.database_url, port, env) as (base_url, serve):
            result = asyncio.run(measure(base_url, mqtt_port, serve, args))
    print_result(result)


if __name__ == "__main__":
    main()
