"""Engines and transactions: one code path for SQLite (default) and PostgreSQL.

Services write in a transaction from ``Database.write()``, which commits on success and
rolls back on any error. On SQLite a write transaction starts with ``BEGIN IMMEDIATE`` so
that it takes the write lock up front and waits instead of failing half-way when another
connection wrote first; the writers of one process queue for it on an asyncio lock. Between
processes it is asked for every millisecond, the loop free meanwhile, not through SQLite's
busy handler, whose growing sleeps (up to 100 ms a retry) let a process that writes all
the time (the device link's batches) starve one that writes now and then (a command). Once
taken, the transaction's statements run on the event loop's own thread through the plain
``sqlite3`` driver (``InlineWriter``): the lock is held for the statements alone, never
across a turn of a busy loop, as it would be if each statement were a hop to a worker
thread and back (docs/PERFORMANCE.md).

``Database.read()`` hands out a connection without a transaction: each statement sees
what was committed when it started (PostgreSQL's READ COMMITTED gave a read transaction no
more than that). On PostgreSQL that saves the BEGIN and COMMIT round trips. On SQLite the
reads run on the event loop's own thread too: an indexed read of a local WAL database
takes microseconds and never waits for a writer.

On PostgreSQL every wait is bounded, so that an outage is a quick 503 (``http/problems.py``) rather
than a hung request, and the pool heals by itself when the server returns: see
"Database outages" in docs/DESIGN.md. The driver's own socket errors and timeouts come out
as ``DatabaseUnreachable``, so that no other ``OSError`` passes for an outage.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, Protocol, TypeVar

import asyncpg
from sqlalchemy import create_engine as create_sync_engine
from sqlalchemy import event
from sqlalchemy.engine import (
    URL,
    Connection,
    CursorResult,
    Dialect,
    Engine,
    ExceptionContext,
    Result,
    Row,
    make_url,
)
from sqlalchemy.exc import ArgumentError, DBAPIError, OperationalError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.pool import Pool, PoolProxiedConnection, QueuePool
from sqlalchemy.sql.base import Executable

from devicecontrol.config import SettingsError
from devicecontrol.database.hot_pool import HotPool
from devicecontrol.database.prepared import Prepared, PreparedResult
from devicecontrol.database.sqlite_checkpoints import Checkpointer

SQLITE_BUSY_TIMEOUT_MS = 10_000
SQLITE_LOCK_POLL_S = 0.001  # how often a writer of another process asks for the write lock
# a WAL reader waits only in rare moments (recovery after a crash, a TRUNCATE checkpoint);
# it waits on the event loop's thread, so briefly, and then the request is a 503
SQLITE_READ_BUSY_TIMEOUT_MS = 250
# map the database file into memory: a read is a page lookup, not a read() system call
SQLITE_MMAP_BYTES = 256 * 1024 * 1024
SQLITE_READ_POOL_SIZE = 4
# a new connection (TCP, startup, auth) takes milliseconds; an unreachable host gets a 503
# within the 2 s an outage answer may take, instead of the OS's minutes of SYN retries
POSTGRES_CONNECT_TIMEOUT_S = 1
# every statement here takes milliseconds; one that stalls (a frozen server, a network
# partition with no RST) fails after this instead of holding its request and pool slot
POSTGRES_COMMAND_TIMEOUT_S = 5
# waiting longer than this for one of the pool's connections means the database is stuck
# or overloaded: shed the request with a 503 rather than queue it without bound
POSTGRES_POOL_TIMEOUT_S = 1
# per process: reads and writes have a pool each (reads run in autocommit, see Database),
# and the hot statements a third (hot_pool.HOT_POOL_SIZE, 8): the polled reads run there.
# No overflow: under load, overflow connections are opened and closed again for every
# burst (TCP, TLS, authentication, each time); a request waits for a pooled connection
# instead, for at most POSTGRES_POOL_TIMEOUT_S. 18 per process leaves room for several
# processes under PostgreSQL's default max_connections of 100.
POSTGRES_READ_POOL = (5, 0)  # (pool_size, max_overflow)
POSTGRES_WRITE_POOL = (5, 0)
# SQLite writers of one process take turns (Database.write): one connection suffices
SQLITE_WRITE_POOL = (1, 1)
_T = TypeVar("_T")
# one statement's parameters, or a list of them (executemany)
WriteParameters = Mapping[str, Any] | Sequence[Mapping[str, Any]]


def driver_url(database_url: str) -> URL:
    """Map the operator's URL (``sqlite:///x.db``, ``postgresql://...``) to its driver:
    asyncpg for PostgreSQL, the standard library's ``sqlite3`` for SQLite."""
    try:
        url = make_url(database_url)
    except ArgumentError:
        raise SettingsError(f"not a database URL: {database_url!r}") from None
    backend = url.get_backend_name()
    if backend == "sqlite":
        if not url.database or url.database == ":memory:":
            raise SettingsError("an SQLite database URL must name a file, e.g. sqlite:///./x.db")
        return url.set(drivername="sqlite+pysqlite")
    if backend in {"postgresql", "postgres"}:
        return url.set(drivername="postgresql+asyncpg")
    raise SettingsError(f"unsupported database {backend!r}: use sqlite:/// or postgresql://")


class DatabaseUnreachable(OperationalError):
    """An ``OSError`` the driver raised while connecting to or talking with the database.

    asyncpg raises refused, reset, unresolvable and timed-out connections as bare
    ``OSError``; named here, at the one place they come from, they are told apart from
    ``OSError`` raised by anything else (a file, a bug), which is no outage.
    """

    def __init__(self, orig: Exception) -> None:
        super().__init__(None, None, orig)


class DatabaseTimedOut(DatabaseUnreachable, TimeoutError):
    """A connect or statement timeout: still a ``TimeoutError`` to whoever waits it out."""


def _unreachable(exc: Exception) -> DatabaseUnreachable:
    return DatabaseTimedOut(exc) if isinstance(exc, TimeoutError) else DatabaseUnreachable(exc)


def _name_driver_oserrors(engine: Engine) -> None:
    """Raise the driver's own ``OSError`` as ``DatabaseUnreachable``, on connect and after."""

    @event.listens_for(engine, "do_connect")
    def connect(dialect: Dialect, _record: Any, cargs: Any, cparams: Any) -> Any:
        try:
            return dialect.connect(*cargs, **cparams)
        except OSError as exc:
            raise _unreachable(exc) from exc

    @event.listens_for(engine, "handle_error")
    def statement_failed(context: ExceptionContext) -> BaseException | None:
        # a failed pre-ping must stay the driver's error: the pool reconnects on it
        original = context.original_exception
        if isinstance(original, OSError) and not context.is_pre_ping:
            return _unreachable(original)
        return None


class Reader(Protocol):
    """What a repository needs from a connection: satisfied by ``AsyncConnection``."""

    async def execute(
        self, statement: Executable, parameters: Mapping[str, Any] | None = None
    ) -> Result[Any]: ...


class LongReader(Reader, Protocol):
    """A connection that can also run a long read (a month of readings summarized) without
    holding up the event loop: SQLite's runs on a worker thread."""

    async def execute_long(
        self, statement: Executable, parameters: Mapping[str, Any] | None = None
    ) -> list[Row[Any]]: ...


class Writer(Reader, Protocol):
    """What a write transaction offers a repository: ``AsyncConnection`` on PostgreSQL,
    ``InlineWriter`` on SQLite."""

    @property
    def dialect(self) -> Dialect: ...

    async def execute(
        self, statement: Executable, parameters: WriteParameters | None = None
    ) -> CursorResult[Any]: ...

    async def run_sync(self, fn: Callable[[Connection], _T]) -> _T: ...


class InlineWriter:
    """An SQLite write transaction on the loop's thread, behind the ``Writer`` face
    (``Database.write()``): each statement runs to its end before ``execute`` returns, so a
    block of them holds the write lock for no longer than SQLite takes."""

    def __init__(self, connection: Connection) -> None:
        self._connection = connection

    @property
    def dialect(self) -> Dialect:
        return self._connection.dialect

    async def execute(
        self, statement: Executable, parameters: WriteParameters | None = None
    ) -> CursorResult[Any]:
        return self._connection.execute(statement, parameters)

    async def run_sync(self, fn: Callable[[Connection], _T]) -> _T:
        return fn(self._connection)


class InlineReader:
    """SQLite reads on the loop's thread, behind the ``Reader`` face (``Database.read()``).

    Hot statements (``prepared.Prepared``) run on the process's own ``sqlite3`` connection,
    with no pool checkout: each statement is fetched whole before the next can start, and
    without a transaction each sees what was committed when it began. Any other statement
    runs on a pooled SQLAlchemy connection, checked out on first use.
    """

    def __init__(self, engine: Engine, hot: Callable[[], sqlite3.Connection]) -> None:
        self._engine = engine
        self._hot = hot
        self._connection: Connection | None = None

    async def execute(
        self, statement: Executable, parameters: Mapping[str, Any] | None = None
    ) -> Result[Any]:
        if self._connection is None:
            self._connection = self._engine.connect()
        return self._connection.execute(statement, parameters)

    async def execute_long(
        self, statement: Executable, parameters: Mapping[str, Any] | None = None
    ) -> list[Row[Any]]:
        """Every row, fetched on a worker thread: SQLite releases the GIL while it works,
        so the loop serves other requests meanwhile."""
        if self._connection is None:
            self._connection = self._engine.connect()
        connection = self._connection
        return await asyncio.to_thread(lambda: list(connection.execute(statement, parameters)))

    async def run_prepared(
        self, statement: Prepared, parameters: Mapping[str, Any]
    ) -> PreparedResult:
        try:
            return statement.run_sqlite(self._engine.dialect, self._hot(), parameters)
        except sqlite3.Error as exc:  # as SQLAlchemy wraps it: errors.py reads its code
            raise DBAPIError.instance(
                None, None, exc, sqlite3.Error, hide_parameters=True, dialect=self._engine.dialect
            ) from exc

    async def __aenter__(self) -> InlineReader:
        return self

    async def __aexit__(self, *_: object) -> None:
        if self._connection is not None:
            self._connection.close()


class PostgresReader:
    """PostgreSQL reads: hot statements on the hot pool (``hot_pool.py``), any other on a
    pooled autocommit connection of the read engine, checked out on first use."""

    def __init__(self, engine: AsyncEngine, hot: HotPool) -> None:
        self._engine = engine
        self._hot = hot
        self._connection: AsyncConnection | None = None

    async def execute(
        self, statement: Executable, parameters: Mapping[str, Any] | None = None
    ) -> Result[Any]:
        if self._connection is None:
            self._connection = await self._engine.connect()
        return await self._connection.execute(statement, parameters)

    async def execute_long(
        self, statement: Executable, parameters: Mapping[str, Any] | None = None
    ) -> list[Row[Any]]:
        return list(await self.execute(statement, parameters))

    async def run_prepared(
        self, statement: Prepared, parameters: Mapping[str, Any]
    ) -> PreparedResult:
        try:
            return await self._hot.run(statement, parameters)
        except (OSError, asyncpg.InterfaceError) as exc:  # refused, reset, timed out, closed
            raise _unreachable(exc) from exc
        except asyncpg.PostgresError as exc:  # its SQLSTATE says whether it is an outage
            raise DBAPIError(None, None, exc, hide_parameters=True) from exc

    async def __aenter__(self) -> PostgresReader:
        return self

    async def __aexit__(self, *_: object) -> None:
        if self._connection is not None:
            await self._connection.close()


def _set_sqlite_pragmas(engine: Engine, *pragmas: str) -> None:
    @event.listens_for(engine, "connect")
    def set_pragmas(dbapi_connection: Any, _record: Any) -> None:
        # take transaction control away from the driver: writes emit their own BEGIN (below)
        # and reads run without one, each statement on its own snapshot
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        for pragma in ("synchronous=NORMAL", "foreign_keys=ON", *pragmas):
            cursor.execute(f"PRAGMA {pragma}")
        cursor.close()


async def _begin_immediate(connection: sqlite3.Connection, dialect: Dialect) -> None:
    """Take the write lock, asking every ``SQLITE_LOCK_POLL_S`` for ``SQLITE_BUSY_TIMEOUT_MS``
    at most, the loop free in between: a gap of a millisecond between another process's
    transactions is enough to get in."""
    deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            connection.execute("BEGIN IMMEDIATE")
            return
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode != sqlite3.SQLITE_BUSY or time.monotonic() > deadline:
                raise DBAPIError.instance(
                    None, None, exc, sqlite3.Error, hide_parameters=True, dialect=dialect
                ) from exc
        await asyncio.sleep(SQLITE_LOCK_POLL_S)


def create_sqlite_writer_engine(url: URL) -> Engine:
    """The plain ``sqlite3`` engine of ``write()``: its connections never wait in SQLite's
    busy handler (``busy_timeout`` 0), as they wait on the loop's thread; ``write()`` takes
    the lock before the first statement (``_begin_immediate``). Nor do their commits
    checkpoint: the process's ``Checkpointer`` thread does."""
    engine = create_sync_engine(
        url.set(drivername="sqlite+pysqlite"),
        pool_size=SQLITE_WRITE_POOL[0],
        max_overflow=SQLITE_WRITE_POOL[1],
        hide_parameters=True,
        connect_args={"check_same_thread": False},
    )
    # the busy timeout covers the switch to WAL of a new file, which another process may
    # be making at the same moment; then it is 0
    _set_sqlite_pragmas(
        engine,
        f"busy_timeout={SQLITE_BUSY_TIMEOUT_MS}",
        "journal_mode=WAL",
        "busy_timeout=0",
        "wal_autocheckpoint=0",  # a thread checkpoints (sqlite_checkpoints.py)
    )
    return engine


def create_postgres_engine(
    database_url: str,
    *,
    command_timeout_s: float | None = POSTGRES_COMMAND_TIMEOUT_S,
    autocommit: bool = False,
) -> AsyncEngine:
    """The engine for a PostgreSQL URL; ``command_timeout_s`` bounds each statement.

    ``autocommit`` (for reads): no BEGIN/COMMIT around statements, and the
    checkout ping is one round trip instead of BEGIN, ping, ROLLBACK. Statement parameters
    (token digests, password hashes) stay out of error messages, and so out of the logs.
    """
    url = driver_url(database_url)
    pool_size, max_overflow = POSTGRES_READ_POOL if autocommit else POSTGRES_WRITE_POOL
    engine = create_async_engine(
        url,
        isolation_level="AUTOCOMMIT" if autocommit else "READ COMMITTED",
        pool_size=pool_size,
        hide_parameters=True,
        max_overflow=max_overflow,
        pool_timeout=POSTGRES_POOL_TIMEOUT_S,
        # a pooled connection may have died with a server restart since its last use: ping
        # it at checkout (about 0.1 ms on a local server) and reconnect, so that a restart
        # between requests costs no request an error
        pool_pre_ping=True,
        connect_args={
            "timeout": POSTGRES_CONNECT_TIMEOUT_S,
            "command_timeout": command_timeout_s,
        },
    )
    _name_driver_oserrors(engine.sync_engine)
    return engine


def create_inline_reader_engine(url: URL, pool_size: int = SQLITE_READ_POOL_SIZE) -> Engine:
    """The plain ``sqlite3`` engine whose connections ``read()`` uses on the loop's thread."""
    engine = create_sync_engine(
        url.set(drivername="sqlite+pysqlite"),
        pool_size=pool_size,
        hide_parameters=True,
        max_overflow=pool_size,
        # used on the event loop's thread only, but created by whichever thread asks first
        # (a test client's portal); the pool hands a connection to one user at a time
        connect_args={"check_same_thread": False},
    )
    _set_sqlite_pragmas(
        engine,
        "query_only=ON",
        f"busy_timeout={SQLITE_READ_BUSY_TIMEOUT_MS}",
        f"mmap_size={SQLITE_MMAP_BYTES}",
    )
    return engine


def _usage(pool: Pool) -> tuple[int, int]:
    if isinstance(pool, QueuePool):
        return pool.checkedout(), pool.size()
    return 0, 0


class Database:
    """The process's engines: write transactions and reads."""

    def __init__(
        self, database_url: str, *, command_timeout_s: float | None = POSTGRES_COMMAND_TIMEOUT_S
    ) -> None:
        self.url = database_url
        url = driver_url(database_url)
        self.is_sqlite = url.get_backend_name() == "sqlite"
        # the engine of the write transactions
        self.engine: Engine | AsyncEngine
        self._write_turn: asyncio.Lock | None = None
        # SQLite reads on the loop's thread through plain sqlite3; PostgreSQL in autocommit
        self._reads: Engine | AsyncEngine
        self._hot: sqlite3.Connection | None = None
        self._hot_checkout: PoolProxiedConnection | None = None
        self._hot_pool: HotPool | None = None
        self._hot_engine: Engine | None = None
        self._checkpointer: Checkpointer | None = None
        if self.is_sqlite:
            self._checkpointer = Checkpointer(url.database or "")
            self.engine = create_sqlite_writer_engine(url)
            self._reads = create_inline_reader_engine(url)
            self._hot_engine = create_inline_reader_engine(url, pool_size=1)
            self._write_turn = asyncio.Lock()
        else:
            self.engine = create_postgres_engine(database_url, command_timeout_s=command_timeout_s)
            self._reads = create_postgres_engine(
                database_url, command_timeout_s=command_timeout_s, autocommit=True
            )
            self._hot_pool = HotPool(
                database_url,
                self.engine.dialect,
                connect_timeout_s=POSTGRES_CONNECT_TIMEOUT_S,
                command_timeout_s=command_timeout_s,
                acquire_timeout_s=POSTGRES_POOL_TIMEOUT_S,
            )

    def read(self) -> InlineReader | PostgresReader:
        """A connection for reading (``async with``); nothing it runs is in a transaction.

        The readers are their own context managers: cheaper than a generator-based one on
        the hot reads, which open one or two per request.
        """
        if self._hot_pool is not None:
            assert isinstance(self._reads, AsyncEngine)
            return PostgresReader(self._reads, self._hot_pool)
        assert isinstance(self._reads, Engine)
        return InlineReader(self._reads, self._hot_sqlite)

    @asynccontextmanager
    async def write(self) -> AsyncIterator[Writer]:
        """A transaction that commits when the block ends and rolls back on any error."""
        if isinstance(self.engine, AsyncEngine):
            async with self.engine.begin() as connection:
                yield connection
            return
        assert self._write_turn is not None and self._checkpointer is not None
        async with self._write_turn:
            with self.engine.connect() as connection:
                raw = connection.connection.driver_connection
                assert isinstance(raw, sqlite3.Connection)
                await _begin_immediate(raw, connection.dialect)
                try:
                    yield InlineWriter(connection)
                except BaseException:
                    connection.rollback()
                    if raw.in_transaction:  # nothing ran: SQLAlchemy began nothing
                        raw.rollback()
                    raise
                connection.commit()
                if raw.in_transaction:
                    raw.commit()
        self._checkpointer.start()  # this process writes: it checkpoints from now on

    def _hot_sqlite(self) -> sqlite3.Connection:
        """The hot statements' own connection (the read pool's pragmas), opened once."""
        if self._hot is None:
            assert self._hot_engine is not None
            self._hot_checkout = self._hot_engine.raw_connection()
            self._hot = self._hot_checkout.driver_connection
        assert isinstance(self._hot, sqlite3.Connection)
        return self._hot

    @property
    def dialect_name(self) -> str:
        """``sqlite`` or ``postgresql``: for the few queries each writes its own way."""
        return self.engine.dialect.name

    def pool_usage(self) -> dict[str, tuple[int, int]]:
        """(checked out, pool size) of the read and the write pool, for /metrics; on
        PostgreSQL the hot statements' pool too."""
        usage = {"read": _usage(self._reads.pool), "write": _usage(self.engine.pool)}
        if self._hot_pool is not None:
            usage["hot"] = self._hot_pool.usage()
        return usage

    async def dispose(self) -> None:
        if isinstance(self.engine, AsyncEngine):
            await self.engine.dispose()
        else:
            self.engine.dispose()
        if self._checkpointer is not None:
            self._checkpointer.stop()
        if self._hot_pool is not None:
            await self._hot_pool.close()
        if isinstance(self._reads, AsyncEngine):
            await self._reads.dispose()
        else:
            if self._hot_checkout is not None:
                self._hot_checkout.close()  # back to its pool, which the dispose closes
                self._hot_checkout = self._hot = None
            if self._hot_engine is not None:
                self._hot_engine.dispose()
            self._reads.dispose()
