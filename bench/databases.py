"""Throw-away databases: an SQLite file in a temporary directory, or a PostgreSQL database
created through an admin URL and dropped afterwards (``WITH (FORCE)``, PostgreSQL 13+)."""

from __future__ import annotations

import asyncio
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from devicecontrol.database.engine import driver_url

BACKENDS = ("sqlite", "postgresql")
DEFAULT_POSTGRESQL_URL = "postgresql://postgres@127.0.0.1:5432/test"


def _database_name(fleet: int) -> str:
    # the pid keeps two benchmark runs on one server apart
    return f"devicecontrol_bench_{os.getpid()}_{fleet}"


async def _administer(admin_url: str, *statements: str) -> None:
    admin = create_async_engine(driver_url(admin_url), isolation_level="AUTOCOMMIT")
    try:
        async with admin.connect() as connection:
            for statement in statements:
                await connection.execute(text(statement))
    finally:
        await admin.dispose()


@contextmanager
def sqlite_database(fleet: int) -> Iterator[str]:
    with tempfile.TemporaryDirectory(prefix="devicecontrol-bench-") as directory:
        yield f"sqlite:///{Path(directory) / _database_name(fleet)}.db"


@contextmanager
def postgresql_database(admin_url: str, fleet: int) -> Iterator[str]:
    name = _database_name(fleet)
    drop = f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'
    asyncio.run(_administer(admin_url, drop, f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(admin_url).set(database=name).render_as_string(hide_password=False)
    finally:
        asyncio.run(_administer(admin_url, drop))


@contextmanager
def throwaway_database(backend: str, fleet: int, postgresql_url: str) -> Iterator[str]:
    """A fresh, empty database's URL for one backend, gone again on exit."""
    if backend == "sqlite":
        with sqlite_database(fleet) as url:
            yield url
    else:
        with postgresql_database(postgresql_url, fleet) as url:
            yield url
