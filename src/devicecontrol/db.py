"""Engines and transactions: one code path for SQLite (default) and PostgreSQL.

Services open a transaction with ``Database.read()`` or ``Database.write()``; both commit
on success and roll back on any error. On SQLite a write transaction starts with
``BEGIN IMMEDIATE`` so that it takes the write lock up front and waits (busy_timeout)
instead of failing half-way when another connection wrote first.

On PostgreSQL every wait is bounded, so that an outage is a quick 503 (``errors.py``) rather
than a hung request, and the pool heals by itself when the server returns: see
"Database outages" in docs/DESIGN.md.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import URL, Connection, make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from devicecontrol.config import SettingsError

SQLITE_BUSY_TIMEOUT_MS = 10_000
# a new connection (TCP, startup, auth) takes milliseconds; an unreachable host gets a 503
# within the 2 s an outage answer may take, instead of the OS's minutes of SYN retries
POSTGRES_CONNECT_TIMEOUT_S = 1
# every statement here takes milliseconds; one that stalls (a frozen server, a network
# partition with no RST) fails after this instead of holding its request and pool slot
POSTGRES_COMMAND_TIMEOUT_S = 5
# waiting longer than this for one of the pool's connections means the database is stuck
# or overloaded: shed the request with a 503 rather than queue it without bound
POSTGRES_POOL_TIMEOUT_S = 1
POSTGRES_POOL_SIZE = 10
POSTGRES_MAX_OVERFLOW = 10
_BEGIN_MODE = "devicecontrol_begin"


def async_url(database_url: str) -> URL:
    """Map the operator's URL (``sqlite:///x.db``, ``postgresql://...``) to an async driver."""
    try:
        url = make_url(database_url)
    except ArgumentError:
        raise SettingsError(f"not a database URL: {database_url!r}") from None
    backend = url.get_backend_name()
    if backend == "sqlite":
        if not url.database or url.database == ":memory:":
            raise SettingsError("an SQLite database URL must name a file, e.g. sqlite:///./x.db")
        return url.set(drivername="sqlite+aiosqlite")
    if backend in {"postgresql", "postgres"}:
        return url.set(drivername="postgresql+asyncpg")
    raise SettingsError(f"unsupported database {backend!r}: use sqlite:/// or postgresql://")


def _configure_sqlite(engine: AsyncEngine) -> None:
    @event.listens_for(engine.sync_engine, "connect")
    def set_pragmas(dbapi_connection: Any, _record: Any) -> None:
        # take transaction control away from the driver; the "begin" hook below emits BEGIN
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        for pragma in (
            "journal_mode=WAL",
            "synchronous=NORMAL",
            "foreign_keys=ON",
            f"busy_timeout={SQLITE_BUSY_TIMEOUT_MS}",
        ):
            cursor.execute(f"PRAGMA {pragma}")
        cursor.close()

    @event.listens_for(engine.sync_engine, "begin")
    def begin(connection: Connection) -> None:
        mode = connection.get_execution_options().get(_BEGIN_MODE, "DEFERRED")
        connection.exec_driver_sql(f"BEGIN {mode}")


def create_engine(
    database_url: str, *, command_timeout_s: float | None = POSTGRES_COMMAND_TIMEOUT_S
) -> AsyncEngine:
    """The engine for a URL; ``command_timeout_s`` bounds each PostgreSQL statement."""
    url = async_url(database_url)
    if url.get_backend_name() == "sqlite":
        engine = create_async_engine(url, pool_size=8, max_overflow=8)
        _configure_sqlite(engine)
        return engine
    return create_async_engine(
        url,
        pool_size=POSTGRES_POOL_SIZE,
        max_overflow=POSTGRES_MAX_OVERFLOW,
        pool_timeout=POSTGRES_POOL_TIMEOUT_S,
        # a pooled connection may have died with a server restart since its last use: ping
        # it at checkout (about 0.3 ms on a local server) and reconnect, so that a restart
        # between requests costs no request an error
        pool_pre_ping=True,
        connect_args={
            "timeout": POSTGRES_CONNECT_TIMEOUT_S,
            "command_timeout": command_timeout_s,
        },
    )


class Database:
    """The process's engine and its two kinds of transaction."""

    def __init__(
        self, database_url: str, *, command_timeout_s: float | None = POSTGRES_COMMAND_TIMEOUT_S
    ) -> None:
        self.url = database_url
        self.engine = create_engine(database_url, command_timeout_s=command_timeout_s)
        self.is_sqlite = self.engine.dialect.name == "sqlite"
        self._writer = (
            self.engine.execution_options(**{_BEGIN_MODE: "IMMEDIATE"})
            if self.is_sqlite
            else self.engine
        )

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncConnection]:
        async with self.engine.begin() as connection:
            yield connection

    @asynccontextmanager
    async def write(self) -> AsyncIterator[AsyncConnection]:
        async with self._writer.begin() as connection:
            yield connection

    async def dispose(self) -> None:
        await self.engine.dispose()
