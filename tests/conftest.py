"""Database fixtures: every test gets a clean, migrated database on SQLite and on PostgreSQL.

The PostgreSQL half runs when DEVICECONTROL_TEST_POSTGRESQL_URL names a server (CI always
sets it). When it is set but the server cannot be reached, the run fails: it never skips.
Migrations run once per session into a template (a file on SQLite, a template database
on PostgreSQL) that each test copies.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import os
import shutil
import sys
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import asyncpg
import pytest
from argon2 import PasswordHasher
from litestar.testing import AsyncTestClient
from sqlalchemy.engine import make_url

from devicecontrol.auth import passwords
from devicecontrol.clock import use_time_source
from devicecontrol.config import Settings
from devicecontrol.database.engine import Database
from devicecontrol.database.migrate import upgrade_database
from devicecontrol.runtime import Runtime
from tests.apps import lent_client
from tests.fake_time import FakeClock
from tests.pg_instance import PostgresInstance, postgres_bin_dir, private_postgresql

# at the end of a whole run: the PostgreSQL half reached every query the SQLite half did
pytest_plugins = ["tests.sql_sites"]

# the run starts some 250 Python processes (serve, its link, the CLI, the workers): none
# may skip writing its bytecode, or each compiles every module it imports again (2.4 s of
# a core for a serve's start instead of 0.8; the whole run 648 s instead of about 400)
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False

POSTGRESQL_URL_VARIABLE = "DEVICECONTROL_TEST_POSTGRESQL_URL"
POSTGRESQL_URL = os.environ.get(POSTGRESQL_URL_VARIABLE, "").strip()
BACKENDS = ["sqlite", "postgresql"] if POSTGRESQL_URL else ["sqlite"]
# for tests of PostgreSQL alone: without the server they are skipped, and say what they need
POSTGRESQL_ONLY = pytest.mark.parametrize(
    "backend",
    [
        pytest.param(
            "postgresql",
            marks=pytest.mark.skipif(
                not POSTGRESQL_URL,
                reason=f"needs a PostgreSQL server: set {POSTGRESQL_URL_VARIABLE} (CI does)",
            ),
        )
    ],
)

# a module whose every check is decided before a query reaches the database (how HTTP is
# parsed and answered, the published clients' wire format, the link's rules) runs on
# SQLite alone: its PostgreSQL half is deselected. tests/sql_sites.py fails a whole run in
# which such a module was the only one to reach a query on SQLite (docs/TESTING.md, "Which
# tests run on PostgreSQL too")
SQLITE_ENOUGH = pytest.mark.sqlite_enough


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    on_sqlite, deselected = [], []
    for item in items:
        params = getattr(item, "callspec", None)
        backends = (
            {params.params.get(n) for n in ("backend", "module_database_url")} if params else set()
        )
        if "postgresql" in backends and item.get_closest_marker("sqlite_enough"):
            deselected.append(item)
        else:
            on_sqlite.append(item)
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = on_sqlite


# argon2id at the lowest cost it accepts: production cost was half the in-process time
TEST_HASHER = passwords.TEST_ONLY_MINIMAL_HASHER


@pytest.fixture(scope="session", autouse=True)
def cheap_password_hashing() -> Iterator[None]:
    """Every in-process test hashes cheaply, unless it asks for ``production_hasher``.

    Servers and CLI runs started as subprocesses get the same profile through
    DEVICECONTROL_PASSWORD_HASHING (tests/processes.py).
    """
    previous = passwords.use_hasher(TEST_HASHER)
    yield
    passwords.use_hasher(previous)


@pytest.fixture
def production_hasher() -> Iterator[PasswordHasher]:
    """The real argon2 parameters, for tests about them: timing, rehash on login."""
    previous = passwords.use_hasher(passwords.PRODUCTION_HASHER)
    yield passwords.PRODUCTION_HASHER
    passwords.use_hasher(previous)


@pytest.fixture
def private_cluster() -> Iterator[PostgresInstance]:
    """A PostgreSQL cluster of the test's own (tests/pg_instance.py), to stop and start at
    will; never the machine's shared one. Fails if CI's PostgreSQL half has no server."""
    if postgres_bin_dir() is None:
        if POSTGRESQL_URL:
            pytest.fail(f"{POSTGRESQL_URL_VARIABLE} is set but no PostgreSQL server is installed")
        pytest.skip("no PostgreSQL server installed to start a private cluster")
    with private_postgresql() as instance:
        yield instance


@pytest.fixture
def clock() -> Iterator[FakeClock]:
    """Time in this process stands still until the test calls ``clock.advance(seconds)``."""
    fake = FakeClock()
    previous = use_time_source(fake)
    yield fake
    use_time_source(previous)


async def _migrate(database_url: str) -> None:
    database = Database(database_url)
    try:
        await upgrade_database(database)
    finally:
        await database.dispose()


def _postgresql_url_for(database_name: str) -> str:
    return (
        make_url(POSTGRESQL_URL).set(database=database_name).render_as_string(hide_password=False)
    )


def _asyncpg_dsn(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


async def _postgresql_admin(statement: str) -> None:
    """One statement on a connection of its own (before the session's admin exists)."""
    connection = await asyncpg.connect(_asyncpg_dsn(POSTGRESQL_URL), timeout=10)
    try:
        await connection.execute(statement)
    finally:
        await connection.close()


# fresh PostgreSQL databases kept being created beyond the one a test takes now
CREATED_AHEAD = 1
# what a test may not change in a database it gives back: its tables, columns, indexes and
# migration (a test that does gets its database dropped instead)
SCHEMA_FINGERPRINT = """
SELECT md5(string_agg(item, ',' ORDER BY item)) FROM (
  SELECT c.relname || ':' || c.relkind::text || ':' || coalesce(string_agg(
      a.attname || ' ' || format_type(a.atttypid, a.atttypmod), ',' ORDER BY a.attnum), '')
    AS item
  FROM pg_class c
  JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = 'public'
  LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
  GROUP BY c.relname, c.relkind
  UNION ALL SELECT 'alembic_version:' || version_num FROM alembic_version
) AS schema
"""


class TemplateShape(NamedTuple):
    fingerprint: str
    emptying: str  # the script that deletes every row and restarts every sequence


class PostgresAdmin:
    """Admin connections for the whole run, on an event loop in a thread of its own.

    Its own thread, because the tests' loops come and go. A database a test is done with
    is emptied in the background on a connection of its own (``reset_soon``, 10 ms) and
    handed to the next test: a CREATE DATABASE from the template took 0.15 s of a core and
    a DROP DATABASE 0.45 s of the disk. Creations, while no emptied database waits, go on a
    second connection ahead of need (``create_soon``); drops, of databases whose schema a
    test changed, on a third that nobody waits for (``drop_later``).
    """

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._connection: asyncpg.Connection = self.run(self._connect())
        self._dropper: asyncpg.Connection = self.run(self._connect())
        self._creator: asyncpg.Connection = self.run(self._connect())
        self._drop_lock: asyncio.Lock = self.run(self._make_lock())
        self._create_lock: asyncio.Lock = self.run(self._make_lock())
        self._drops: list[concurrent.futures.Future[None]] = []
        self._resetters: dict[str, asyncpg.Connection] = {}

    @staticmethod
    async def _connect() -> asyncpg.Connection:
        return await asyncpg.connect(_asyncpg_dsn(POSTGRESQL_URL), timeout=10)

    @staticmethod
    async def _make_lock() -> asyncio.Lock:
        return asyncio.Lock()

    def run(self, work: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(work, self._loop).result(timeout=60)

    def execute(self, statement: str) -> None:
        self.run(self._connection.execute(statement))

    async def _drop(self, name: str) -> None:
        async with self._drop_lock:
            await self.forget(name)
            await self._dropper.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    async def _create(self, statement: str) -> None:
        async with self._create_lock:
            await self._creator.execute(statement)

    def reset_soon(self, name: str, template: TemplateShape) -> concurrent.futures.Future[bool]:
        """Empty database ``name`` for the next test, in the background: its connections
        ended, its rows deleted, its sequences back at 1. False (and nothing done) when its
        schema is no longer the template's, for a test that changed it."""
        return asyncio.run_coroutine_threadsafe(self._reset(name, template), self._loop)

    async def _reset(self, name: str, template: TemplateShape) -> bool:
        connection = self._resetters.get(name)
        if connection is None:
            connection = await asyncpg.connect(_asyncpg_dsn(_postgresql_url_for(name)), timeout=10)
            self._resetters[name] = connection
        for _ in range(500):  # until no other connection is left: none may write after
            others = await connection.fetchval(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                " WHERE datname = $1 AND pid <> pg_backend_pid()",
                name,
            )
            if not others:
                break
            await asyncio.sleep(0.01)
        if await connection.fetchval(SCHEMA_FINGERPRINT) != template.fingerprint:
            await self.forget(name)
            return False
        async with connection.transaction():
            await connection.execute(template.emptying)
        return True

    async def forget(self, name: str) -> None:
        """Close the reset connection to ``name`` (before it is dropped)."""
        connection = self._resetters.pop(name, None)
        if connection is not None:
            await connection.close()

    async def shape_of(self, name: str) -> TemplateShape:
        """What a reset compares a database with, and the script that empties one."""
        connection = await asyncpg.connect(_asyncpg_dsn(_postgresql_url_for(name)), timeout=10)
        try:
            fingerprint = await connection.fetchval(SCHEMA_FINGERPRINT)
            tables = await connection.fetch(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
                " AND tablename <> 'alembic_version' ORDER BY tablename"
            )
            sequences = await connection.fetch(
                "SELECT sequencename FROM pg_sequences WHERE schemaname = 'public'"
            )
        finally:
            await connection.close()
        statements = [
            "SET LOCAL session_replication_role = replica",  # no foreign key checks
            *(f'DELETE FROM "{row[0]}"' for row in tables),
            *(f"SELECT setval('\"{row[0]}\"', 1, false)" for row in sequences),
        ]
        return TemplateShape(fingerprint, ";\n".join(statements))

    def create_soon(self, statement: str) -> concurrent.futures.Future[None]:
        """Run ``statement`` on the creation connection, in order, while the caller goes on."""
        return asyncio.run_coroutine_threadsafe(self._create(statement), self._loop)

    def drop_later(self, name: str) -> None:
        """Drop database ``name`` on the drop connection, in order; failures surface at
        close."""
        self._drops.append(asyncio.run_coroutine_threadsafe(self._drop(name), self._loop))
        self._drops = [f for f in self._drops if not f.done() or f.exception() is not None]

    def close(self) -> None:
        for drop in self._drops:
            drop.result(timeout=60)
        for name in list(self._resetters):
            self.run(self.forget(name))
        self.run(self._connection.close())
        self.run(self._dropper.close())
        self.run(self._creator.close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()


class DatabaseFactory:
    """Hands out fresh migrated databases for one backend; cleans up what it made."""

    def __init__(self, backend: str, workdir: Path, admin: PostgresAdmin | None) -> None:
        self.backend = backend
        self.workdir = workdir
        self.admin = admin
        self.prefix = f"dctest_{os.getpid()}_{uuid.uuid4().hex[:6]}"
        self.template: str | None = None
        self.made: list[str] = []
        # PostgreSQL databases being created ahead of the tests that will take them
        self._ahead: collections.deque[tuple[str, concurrent.futures.Future[None]]] = (
            collections.deque()
        )
        # PostgreSQL databases given back, being emptied for the next test
        self._given_back: collections.deque[tuple[str, concurrent.futures.Future[bool]]] = (
            collections.deque()
        )
        self._shape: TemplateShape | None = None

    def _template(self) -> str:
        if self.template is None:
            if self.backend == "sqlite":
                path = self.workdir / "template.db"
                asyncio.run(_migrate(f"sqlite:///{path}"))
                self.template = str(path)
            else:
                name = f"{self.prefix}_template"
                self._admin(f'CREATE DATABASE "{name}"')
                self.made.append(name)
                asyncio.run(_migrate(_postgresql_url_for(name)))
                assert self.admin is not None, "PostgreSQL statements need the session's admin"
                self._shape = self.admin.run(self.admin.shape_of(name))
                self.template = name
        return self.template

    def new_url(self, directory: Path) -> str:
        template = self._template()
        if self.backend == "sqlite":
            path = directory / "devicecontrol.db"
            shutil.copyfile(template, path)
            return f"sqlite:///{path}"
        while self._given_back:
            name, emptied = self._given_back.popleft()
            if emptied.result(timeout=60):
                return _postgresql_url_for(name)
            self._drop(name)  # its schema was changed
        while len(self._ahead) <= CREATED_AHEAD:
            name = f"{self.prefix}_{uuid.uuid4().hex[:10]}"
            assert self.admin is not None, "PostgreSQL statements need the session's admin"
            created = self.admin.create_soon(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
            self.made.append(name)
            self._ahead.append((name, created))
        name, created = self._ahead.popleft()
        created.result(timeout=60)
        return _postgresql_url_for(name)

    def drop(self, url: str) -> None:
        """Done with ``url``: a PostgreSQL database is emptied for the next test (creating
        one from the template took 0.15 s of a core, and dropping it 0.45 s of the disk)."""
        if self.backend == "postgresql":
            name = make_url(url).database
            assert name is not None and self.admin is not None and self._shape is not None
            self._given_back.append((name, self.admin.reset_soon(name, self._shape)))

    def _drop(self, name: str) -> None:
        assert self.admin is not None, "PostgreSQL statements need the session's admin"
        self.admin.drop_later(name)
        self.made.remove(name)

    def drop_all(self) -> None:
        for _, created in self._ahead:  # made ahead for tests that never came
            created.result(timeout=60)
        self._ahead.clear()
        for name, emptied in self._given_back:
            emptied.result(timeout=60)
            if self.admin is not None:
                self.admin.run(self.admin.forget(name))
        self._given_back.clear()
        for name in reversed(list(self.made)):
            self._admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        self.made.clear()

    def _admin(self, statement: str) -> None:
        assert self.admin is not None, "PostgreSQL statements need the session's admin"
        self.admin.execute(statement)


@pytest.fixture(scope="session")
def database_factories(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[dict[str, DatabaseFactory]]:
    if POSTGRESQL_URL:
        try:
            asyncio.run(_postgresql_admin("SELECT 1"))
        except (OSError, asyncpg.PostgresError) as exc:
            pytest.exit(f"{POSTGRESQL_URL_VARIABLE} is set but PostgreSQL is unreachable: {exc}", 3)
    admin = PostgresAdmin() if POSTGRESQL_URL else None
    factories = {b: DatabaseFactory(b, tmp_path_factory.mktemp(b), admin) for b in BACKENDS}
    yield factories
    for factory in factories.values():
        factory.drop_all()
    if admin is not None:
        admin.close()


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def database_url(
    backend: str, database_factories: dict[str, DatabaseFactory], tmp_path: Path
) -> Iterator[str]:
    """A clean, migrated database of its own for this test."""
    factory = database_factories[backend]
    url = factory.new_url(tmp_path)
    yield url
    factory.drop(url)


@pytest.fixture(scope="module", params=BACKENDS)
def module_database_url(
    request: pytest.FixtureRequest,
    database_factories: dict[str, DatabaseFactory],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[str]:
    """A clean, migrated database shared by one module's tests, on each backend.

    For a server those tests share: each start-up costs seconds. Only tests whose answers
    do not depend on what the others did may share one.
    """
    factory = database_factories[request.param]
    url = factory.new_url(tmp_path_factory.mktemp(f"shared-{request.param}"))
    yield url
    factory.drop(url)


@pytest.fixture
def settings(database_url: str) -> Settings:
    """Without the web app's routes: the app an in-process test builds costs half as much
    (tests/webapp/ has them)."""
    return Settings(database_url=database_url, web_app=False)


@pytest.fixture
async def runtime(settings: Settings) -> AsyncIterator[Runtime]:
    """Direct access to the services and the database, beside the HTTP client."""
    runtime = Runtime.from_settings(settings)
    yield runtime
    await runtime.close()


@pytest.fixture
async def client(settings: Settings) -> AsyncIterator[AsyncTestClient]:
    """The real app over HTTP semantics (ASGI in-process), on this test's database."""
    async with lent_client(settings) as test_client:
        yield test_client
