"""python -m bench.field_flood: a device that invents field names, measured as an attacker
would, against a real ``devicecontrol serve`` (embedded device link) over loopback.

One plug reports ``--readings`` readings within its rate (15 a second; 20 are allowed), each
with ``--fields`` numeric fields never seen before (about 3.6 KB at 400, within the 4 KiB and
32-level rules). Then, while its owner downloads the plug's CSV export again and again,
another user reads one of their own controllers (``GET /v1/controllers/{sn}``) as fast as
one client can. Reported:

- what the flood left: readings stored, field names kept for the plug (the budget, see
  docs/DEVICES.md), the CSV's columns, bytes and seconds, the summary's bytes;
- the other user's read, p50, p99 and worst, while the exports run, beside the same read
  with nothing else running (the ceiling, measured in the same run), and their ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import threading
import time
from typing import Any

import aiomqtt
import httpx
import msgspec
from sqlalchemy import func, select

from bench.databases import DEFAULT_POSTGRESQL_URL, throwaway_database
from bench.devices import SECRET, print_result, quantile, serving
from bench.events import fill
from bench.fleet import serial_number
from bench.servers import free_port
from devicecontrol.database.engine import Database
from devicecontrol.database.tables import reading_fields, readings

FLOODER, BYSTANDER = 0, 100  # controller indexes: user 1's plug, user 2's controller
RATE = 15.0  # readings a second, under the default 20
SLOW_S = 0.1  # a read a user notices


async def flood(mqtt_port: int, count: int, fields: int) -> float:
    """``count`` readings of new names each, at ``RATE``; seconds taken."""
    serial = serial_number(FLOODER)
    started = time.perf_counter()
    async with aiomqtt.Client(
        "127.0.0.1", mqtt_port, identifier=serial, username=serial, password=SECRET, timeout=30
    ) as plug:
        for number in range(count):
            # short names (hex of a running number) and one-digit values: 400 a reading fit
            reading = {f"{number * fields + field:x}": field % 10 for field in range(fields)}
            await plug.publish(f"devices/{serial}/state", msgspec.json.encode(reading), qos=1)
            await asyncio.sleep(max(0.0, started + (number + 1) / RATE - time.perf_counter()))
    return time.perf_counter() - started


async def stored(database_url: str) -> dict[str, int]:
    database = Database(database_url)
    try:
        async with database.read() as connection:
            rows = await connection.execute(
                select(func.count()).select_from(readings).where(readings.c.controller_id == 1)
            )
            names = await connection.execute(
                select(func.count()).select_from(reading_fields)
                .where(reading_fields.c.controller_id == 1)
            )  # fmt: skip
            return {"readings stored": rows.scalar_one(), "field names kept": names.scalar_one()}
    finally:
        await database.dispose()


def reads(base_url: str, token: str, until: threading.Event) -> list[float]:
    """The bystander's reads of their own controller, back to back, until ``until``."""
    times = []
    path = f"/v1/controllers/{serial_number(BYSTANDER)}"
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=base_url, headers=headers, timeout=120) as client:
        while not until.is_set():
            started = time.perf_counter()
            client.get(path).raise_for_status()
            times.append(time.perf_counter() - started)
    return times


def read_for(base_url: str, token: str, seconds: float) -> list[float]:
    done = threading.Event()
    until = threading.Timer(seconds, done.set)
    until.start()
    return reads(base_url, token, done)


def exports(base_url: str, token: str, rounds: int) -> dict[str, Any]:
    """The flooder's owner downloads the CSV ``rounds`` times, and the summary once."""
    serial = serial_number(FLOODER)
    headers = {"Authorization": f"Bearer {token}"}
    seconds, size, columns = [], 0, 0
    with httpx.Client(base_url=base_url, headers=headers, timeout=120) as client:
        for _ in range(rounds):
            started = time.perf_counter()
            response = client.get(f"/v1/controllers/{serial}/readings", params={"format": "csv"})
            response.raise_for_status()
            seconds.append(time.perf_counter() - started)
            size = len(response.content)
            columns = response.text.split("\r\n", 1)[0].count(",") + 1
        summary = client.get(f"/v1/controllers/{serial}/readings/summary")
        summary.raise_for_status()
    return {
        "csv columns": columns,
        "csv bytes": size,
        "csv ms (median)": quantile(seconds, 0.5) * 1000,
        "summary bytes": len(summary.content),
    }


def measure(base_url: str, mqtt_port: int, tokens: list[str], args: Any) -> dict[str, Any]:
    result: dict[str, Any] = {}
    result["flood seconds"] = asyncio.run(flood(mqtt_port, args.readings, args.fields))
    time.sleep(1)  # the last batch stored
    result.update(asyncio.run(stored(args.database_url)))
    bystander = tokens[1]  # user 2's
    alone = read_for(base_url, bystander, args.seconds)
    done = threading.Event()
    during: list[float] = []
    reader = threading.Thread(target=lambda: during.extend(reads(base_url, bystander, done)))
    reader.start()
    try:
        result.update(exports(base_url, tokens[0], args.rounds))  # user 1's
    finally:
        done.set()
        reader.join()
    for label, times in (("alone (ceiling)", alone), ("during exports", during)):
        result[f"other's read {label} reads"] = len(times)
        result[f"other's read {label} p50 ms"] = quantile(times, 0.5) * 1000
        result[f"other's read {label} p99 ms"] = quantile(times, 0.99) * 1000
        result[f"other's read {label} worst ms"] = max(times, default=float("nan")) * 1000
        result[f"other's read {label} over 100 ms"] = sum(1 for t in times if t > SLOW_S)
    result["other's read p99 during / alone"] = (
        result["other's read during exports p99 ms"] / result["other's read alone (ceiling) p99 ms"]
    )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.field_flood", description=__doc__)
    parser.add_argument("--readings", type=int, default=600)
    parser.add_argument("--fields", type=int, default=400, help="new field names a reading")
    parser.add_argument("--rounds", type=int, default=200, help="CSV downloads")
    parser.add_argument("--seconds", type=float, default=5, help="the ceiling's reads")
    parser.add_argument("--backend", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--postgresql-url", default=DEFAULT_POSTGRESQL_URL)
    args = parser.parse_args()
    with throwaway_database(args.backend, 1000, args.postgresql_url) as database_url:
        args.database_url = database_url
        tokens = asyncio.run(fill(database_url, 1000))  # users 1, 2, ... in order
        port, mqtt_port = free_port(), free_port()
        env = {
            **os.environ,
            "DEVICECONTROL_LOG_LEVEL": "warning",
            "DEVICECONTROL_MQTT_LISTEN": f"127.0.0.1:{mqtt_port}",
        }
        with serving(database_url, port, env) as (base_url, _):
            result = measure(base_url, mqtt_port, tokens, args)
    print_result(result, width=40, decimals=1)


if __name__ == "__main__":
    main()
