"""python -m bench.readings: the readings summary and the CSV export over a month of history.

A throw-away database filled by bench.provision (1,000 controllers), then a month of one
reading a minute (43,200 rows) for one smart plug (``relay_state``, ``power`` as a list)
and one melissa (four numbers), as the link stores them. A real ``devicecontrol serve``
answers; this process asks over loopback, one request at a time:

- the summary of the whole month, ``every=1h`` (720 buckets) and ``every=1d`` (local days),
  for each controller: p50 and p99 of ROUNDS requests;
- the CSV export of the plug's month: rows a second, over ROUNDS downloads.

The ceilings, in the same run and on the same rows, are the database's own floor for each
job: one pass of its JSON function over the month's payloads (``json_each`` /
``jsonb_each``, counted), and the bare ``SELECT`` of the month's rows fetched by
SQLAlchemy, for the export.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import random
import time
from datetime import datetime, timedelta
from typing import Any

import httpx
import msgspec
from sqlalchemy import insert, text

from bench.databases import DEFAULT_POSTGRESQL_URL, throwaway_database
from bench.devices import print_result, quantile, serving
from bench.fleet import Fleet, serial_number
from bench.provision import provision
from bench.servers import free_port
from devicecontrol.clock import utcnow
from devicecontrol.database.engine import Database
from devicecontrol.database.tables import readings
from devicecontrol.devices.readings import rollups

MINUTES = 30 * 24 * 60
PLUG, MELISSA = 0, 1  # controller indexes (bench.provision: even plugs, odd melissas)
OWNER = 1  # bench.fleet: user 1 owns controllers 0..99
BATCH = 10_000


def month_of_readings(index: int, now: datetime) -> list[dict[str, Any]]:
    """One reading a minute for 30 days up to ``now``: a plug that cycles, a room that
    warms and cools with the day."""
    rng = random.Random(index)
    start = now - timedelta(minutes=MINUTES)
    rows = []
    for minute in range(MINUTES):
        hour = (minute // 60) % 24
        if index == PLUG:
            on = 7 <= hour < 23
            watts = round(rng.uniform(40, 60) if on else rng.uniform(0, 1), 1)
            payload = {"relay_state": "on" if on else "off", "power": [watts]}
        else:
            temp = round(21 + 2 * math.sin(minute / 1440 * 2 * math.pi) + rng.uniform(-0.3, 0.3), 1)
            humidity = round(45 + rng.uniform(-5, 5), 1)
            payload = {
                "temp": temp,
                "humidity": humidity,
                "raw_temperature": int(temp * 1000),
                "raw_humidity": int(humidity * 1000),
            }
        rows.append(
            {
                "controller_id": index + 1,
                "assignment_id": index + 1,
                "payload": msgspec.json.encode(payload).decode(),
                "created_at": start + timedelta(minutes=minute),
            }
        )
    return rows


async def fill(database_url: str) -> str:
    """The month for both controllers; the owner's access token."""
    provisioned = await provision(database_url, Fleet(1000))
    database = Database(database_url, command_timeout_s=None)
    try:
        now = utcnow()
        for index in (PLUG, MELISSA):
            rows = month_of_readings(index, now)
            for first in range(0, len(rows), BATCH):
                async with database.write() as connection:
                    await connection.execute(insert(readings), rows[first : first + BATCH])
        async with database.write() as connection:
            await connection.execute(text("ANALYZE"))
    finally:
        await database.dispose()
    return provisioned.access_tokens[OWNER][0]


async def ceilings(database_url: str, rounds: int) -> dict[str, float]:
    """The database's own floor on the plug's month: one JSON pass, and the bare rows."""
    database = Database(database_url, command_timeout_s=None)
    each = "json_each(r.payload)" if database.is_sqlite else "jsonb_each(r.payload::jsonb)"
    one_pass = text(
        f"SELECT count(*) FROM readings r, {each} WHERE r.controller_id = :id"  # noqa: S608
    )
    bare = text(
        "SELECT id, payload, created_at FROM readings WHERE controller_id = :id"
        " ORDER BY created_at, id"
    )
    passes, fetches = [], []
    try:
        for _ in range(rounds):
            async with database.read() as connection:
                started = time.perf_counter()
                await connection.execute_long(one_pass, {"id": PLUG + 1})
                passes.append(time.perf_counter() - started)
                started = time.perf_counter()
                fetched = await connection.execute_long(bare, {"id": PLUG + 1})
                fetches.append(len(fetched) / (time.perf_counter() - started))
    finally:
        await database.dispose()
    return {"json_pass_ms": quantile(passes, 0.5) * 1000, "bare_rows_per_s": max(fetches)}


async def rolled_until(database_url: str) -> datetime | None:
    database = Database(database_url, command_timeout_s=None)
    try:
        async with database.read() as connection:
            place = await rollups.progress(connection)
        return None if place is None else place[0]
    finally:
        await database.dispose()


def wait_for_rollups(database_url: str, timeout_s: float) -> float:
    """Seconds until the link has rolled the month up (to 20 minutes ago)."""
    started = time.monotonic()
    goal = utcnow() - timedelta(minutes=20)
    while time.monotonic() - started < timeout_s:
        reached = asyncio.run(rolled_until(database_url))
        if reached is not None and reached >= goal:
            return time.monotonic() - started
        time.sleep(1)
    raise RuntimeError(f"the rollups did not catch up within {timeout_s} s")


def measure(base_url: str, token: str, rounds: int, label: str) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {token}"}
    result: dict[str, Any] = {}
    now = datetime.utcnow().replace(microsecond=0)
    window = {
        "since": (now - timedelta(days=30)).strftime("%Y-%m-%d %H:%M:%S"),
        "until": now.strftime("%Y-%m-%d %H:%M:%S"),
    }
    with httpx.Client(base_url=base_url, headers=headers, timeout=60) as client:
        for name, index in (("plug", PLUG), ("melissa", MELISSA)):
            path = f"/v1/controllers/{serial_number(index)}/readings/summary"
            for every in ("1h", "1d"):
                times = []
                for _ in range(rounds):
                    started = time.perf_counter()
                    response = client.get(path, params={**window, "every": every})
                    times.append(time.perf_counter() - started)
                    response.raise_for_status()
                buckets = response.json()["summary"]["buckets"]
                result[f"{label} {name} {every} buckets"] = len(buckets)
                result[f"{label} {name} {every} p50 ms"] = quantile(times, 0.5) * 1000
                result[f"{label} {name} {every} p99 ms"] = quantile(times, 0.99) * 1000
        export = f"/v1/controllers/{serial_number(PLUG)}/readings"
        speeds = []
        for _ in range(max(3, rounds // 5)):
            started = time.perf_counter()
            rows = 0
            with client.stream("GET", export, params={"format": "csv"}) as response:
                response.raise_for_status()
                for line in response.iter_lines():
                    rows += bool(line)
            speeds.append((rows - 1) / (time.perf_counter() - started))
        result["csv rows"] = rows - 1
        result["csv rows/s (median)"] = quantile(speeds, 0.5)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.readings", description=__doc__)
    parser.add_argument("--backend", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--postgresql-url", default=DEFAULT_POSTGRESQL_URL)
    parser.add_argument("--rounds", type=int, default=50)
    args = parser.parse_args()
    with throwaway_database(args.backend, 43_200, args.postgresql_url) as database_url:
        token = asyncio.run(fill(database_url))
        port = free_port()
        env = {**os.environ, "DEVICECONTROL_LOG_LEVEL": "warning"}
        env["DEVICECONTROL_MQTT_LISTEN"] = f"127.0.0.1:{free_port()}"
        with serving(database_url, port, env) as (base_url, _):
            result = measure(base_url, token, max(3, args.rounds // 5), "raw")
            result["rollups caught up in s"] = wait_for_rollups(database_url, 1800)
            result.update(measure(base_url, token, args.rounds, "rolled"))
        result.update(asyncio.run(ceilings(database_url, 5)))
    for every in ("1h", "1d"):
        p99 = result[f"rolled plug {every} p99 ms"]
        result[f"rolled plug {every} p99 / json pass"] = p99 / result["json_pass_ms"]
    result["csv / bare rows"] = result["csv rows/s (median)"] / result["bare_rows_per_s"]
    print_result(result, width=36)


if __name__ == "__main__":
    main()
