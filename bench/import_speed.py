"""How long ``devicecontrol controllers import`` takes on a large file, end to end.

``python -m bench.import_speed [--rows 100000] [--backend sqlite|postgresql|both]`` writes a
CSV (every column filled, a claim code on each row, a share of the rows owned), makes a
fresh database per backend with the owners' accounts in it, and times real CLI processes:
the first import, a rerun of the same file (every row already registered), and an export.
The times include the process start and the schema check, as an operator sees them.

``--hook`` also times the first import with the broker hook configured (and the link on
RabbitMQ): provisioning then writes the database only, as with the embedded broker, which
is what the comparison shows.
"""

from __future__ import annotations

import asyncio
import csv
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import click
from sqlalchemy import func, insert, select

from bench.databases import BACKENDS, DEFAULT_POSTGRESQL_URL, throwaway_database
from devicecontrol.auth.passwords import hash_password
from devicecontrol.clock import utcnow
from devicecontrol.controllers.csvfile import COLUMNS
from devicecontrol.database.engine import Database
from devicecontrol.database.migrate import upgrade_database
from devicecontrol.database.tables import controller_assignments, controllers, users

OWNERS = 1000
TYPES = ("smart_plug", "melissa", "bobbie", "vicki")
DEVICECONTROL = [sys.executable, "-m", "devicecontrol"]
# the settings of a deployment whose brokers ask the hook (nothing listens: the import
# must not need a broker)
HOOK_ENVIRONMENT = {
    "DEVICECONTROL_BROKER_HOOK_LISTEN": "127.0.0.1:9",
    "DEVICECONTROL_BROKER_HOOK_TOKEN": "bench-hook-token-not-for-production-0123456789",
    "DEVICECONTROL_AMQP_URL": "amqp://devicecontrol-link:bench-password@127.0.0.1:9/",
}


def owner_email(index: int) -> str:
    return f"owner{index:05d}@import.example"


def write_file(path: Path, rows: int, owned_every: int) -> None:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(COLUMNS)
        for index in range(rows):
            owned = owned_every > 0 and index % owned_every == 0
            values = {
                "serial_number": f"IMPORT-{index:08d}",
                "mac": f"02:{index >> 32 & 0xFF:02X}:{index >> 24 & 0xFF:02X}:"
                f"{index >> 16 & 0xFF:02X}:{index >> 8 & 0xFF:02X}:{index & 0xFF:02X}",
                "type": TYPES[index % len(TYPES)],
                "name": f"Device {index}",
                "firmware_version": "1.4.2",
                "brand_id": str(1 + index % 7),
                "device_group": "climate",
                "room_id": str(index % 12) if owned else "",
                "claim_code": f"CODE-{index:08X}",
                "owner": owner_email(index % OWNERS) if owned else "",
                "online": "true" if index % 3 == 0 else "false",
                "device_secret": f"import-device-secret-{index:08d}",
            }
            writer.writerow(values[column] for column in COLUMNS)


async def prepare(database_url: str) -> None:
    """The schema and the owners' accounts (one shared password hash: argon2 is slow)."""
    database = Database(database_url, command_timeout_s=None)
    try:
        await upgrade_database(database)
        password_hash, now = hash_password("import-bench-password"), utcnow()
        async with database.write() as connection:
            await connection.execute(
                insert(users),
                [
                    {
                        "username": owner_email(i),
                        "username_key": owner_email(i),
                        "password_hash": password_hash,
                        "created_at": now,
                    }
                    for i in range(OWNERS)
                ],
            )
    finally:
        await database.dispose()


async def count_rows(database_url: str) -> tuple[int, int]:
    database = Database(database_url, command_timeout_s=None)
    try:
        async with database.read() as connection:
            registered = await connection.execute(select(func.count()).select_from(controllers))
            records = await connection.execute(
                select(func.count()).select_from(controller_assignments)
            )
            return registered.scalar_one(), records.scalar_one()
    finally:
        await database.dispose()


def timed_cli(*args: str, env: dict[str, str] | None = None) -> tuple[float, str]:
    started = time.perf_counter()
    result = subprocess.run(  # noqa: S603 (our own CLI, fixed arguments)
        [*DEVICECONTROL, *args],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, **(env or {})},
    )
    seconds = time.perf_counter() - started
    if result.returncode != 0:
        raise click.ClickException(f"{' '.join(args)} failed:\n{result.stderr}")
    return seconds, result.stdout.strip().splitlines()[-1]


def measure(backend: str, csv_path: Path, rows: int, postgresql_url: str) -> None:
    with throwaway_database(backend, rows, postgresql_url) as url:
        asyncio.run(prepare(url))
        first, summary = timed_cli("controllers", "import", str(csv_path), "--database-url", url)
        registered, records = asyncio.run(count_rows(url))
        click.echo(f"{backend:10} import  {first:6.2f} s  {summary}")
        click.echo(f"{'':10}         {registered} controllers, {records} assignment records")
        rerun, summary = timed_cli("controllers", "import", str(csv_path), "--database-url", url)
        click.echo(f"{backend:10} rerun   {rerun:6.2f} s  {summary}")
        export_path = csv_path.with_name(f"export-{backend}.csv")
        exported, summary = timed_cli(
            "controllers", "export", str(export_path), "--database-url", url
        )
        click.echo(f"{backend:10} export  {exported:6.2f} s  {summary}")


def measure_with_hook(backend: str, csv_path: Path, rows: int, postgresql_url: str) -> None:
    """The first import again, on a fresh database, with the hook configured."""
    with throwaway_database(backend, rows, postgresql_url) as url:
        asyncio.run(prepare(url))
        first, summary = timed_cli(
            "controllers", "import", str(csv_path), "--database-url", url, env=HOOK_ENVIRONMENT
        )
        click.echo(f"{backend:10} import with the hook  {first:6.2f} s  {summary}")


@click.command()
@click.option("--rows", type=click.IntRange(1), default=100_000, show_default=True)
@click.option(
    "--owned-every", type=click.IntRange(0), default=5, show_default=True,
    help="Every Nth row names an owner (0: none).",
)  # fmt: skip
@click.option(
    "--backend", type=click.Choice([*BACKENDS, "both"]), default="both", show_default=True
)
@click.option("--postgresql-url", default=DEFAULT_POSTGRESQL_URL, show_default=True)
@click.option("--hook", is_flag=True, help="Also the first import with the broker hook set.")
def main(rows: int, owned_every: int, backend: str, postgresql_url: str, hook: bool) -> None:
    """Time a large ``controllers import`` (and its rerun, and an export) per backend."""
    with tempfile.TemporaryDirectory(prefix="devicecontrol-import-") as directory:
        csv_path = Path(directory) / "controllers.csv"
        write_file(csv_path, rows, owned_every)
        click.echo(
            f"{rows} rows, every {owned_every or 'no'}th owned, {csv_path.stat().st_size} bytes"
        )
        for each in BACKENDS if backend == "both" else (backend,):
            measure(each, csv_path, rows, postgresql_url)
            if hook:
                measure_with_hook(each, csv_path, rows, postgresql_url)


if __name__ == "__main__":
    main()
