"""Database fixtures: every test gets a clean, migrated database on SQLite and on PostgreSQL.

The PostgreSQL half runs when DEVICECONTROL_TEST_POSTGRESQL_URL names a server (CI always
sets it). When it is set but the server cannot be reached, the run fails: it never skips.
Migrations run once per session into a template (a file on SQLite, a template database
on PostgreSQL) that each test copies.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import asyncpg
import pytest
from litestar.testing import AsyncTestClient
from sqlalchemy.engine import make_url

from devicecontrol.app import create_app
from devicecontrol.config import Settings
from devicecontrol.db import Database
from devicecontrol.migrate import upgrade_database
from devicecontrol.runtime import Runtime

POSTGRESQL_URL_VARIABLE = "DEVICECONTROL_TEST_POSTGRESQL_URL"
POSTGRESQL_URL = os.environ.get(POSTGRESQL_URL_VARIABLE, "").strip()
BACKENDS = ["sqlite", "postgresql"] if POSTGRESQL_URL else ["sqlite"]


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
    connection = await asyncpg.connect(_asyncpg_dsn(POSTGRESQL_URL), timeout=10)
    try:
        await connection.execute(statement)
    finally:
        await connection.close()


class DatabaseFactory:
    """Hands out fresh migrated databases for one backend; cleans up what it made."""

    def __init__(self, backend: str, workdir: Path) -> None:
        self.backend = backend
        self.workdir = workdir
        self.prefix = f"dctest_{os.getpid()}_{uuid.uuid4().hex[:6]}"
        self.template: str | None = None
        self.made: list[str] = []

    def _template(self) -> str:
        if self.template is None:
            if self.backend == "sqlite":
                path = self.workdir / "template.db"
                asyncio.run(_migrate(f"sqlite:///{path}"))
                self.template = str(path)
            else:
                name = f"{self.prefix}_template"
                asyncio.run(_postgresql_admin(f'CREATE DATABASE "{name}"'))
                self.made.append(name)
                asyncio.run(_migrate(_postgresql_url_for(name)))
                self.template = name
        return self.template

    def new_url(self, directory: Path) -> str:
        template = self._template()
        if self.backend == "sqlite":
            path = directory / "devicecontrol.db"
            shutil.copyfile(template, path)
            return f"sqlite:///{path}"
        name = f"{self.prefix}_{uuid.uuid4().hex[:10]}"
        asyncio.run(_postgresql_admin(f'CREATE DATABASE "{name}" TEMPLATE "{template}"'))
        self.made.append(name)
        return _postgresql_url_for(name)

    def drop(self, url: str) -> None:
        if self.backend == "postgresql":
            name = make_url(url).database
            asyncio.run(_postgresql_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
            self.made.remove(name)

    def drop_all(self) -> None:
        for name in reversed(list(self.made)):
            asyncio.run(_postgresql_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        self.made.clear()


@pytest.fixture(scope="session")
def database_factories(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[dict[str, DatabaseFactory]]:
    if POSTGRESQL_URL:
        try:
            asyncio.run(_postgresql_admin("SELECT 1"))
        except (OSError, asyncpg.PostgresError) as exc:
            pytest.exit(f"{POSTGRESQL_URL_VARIABLE} is set but PostgreSQL is unreachable: {exc}", 3)
    factories = {b: DatabaseFactory(b, tmp_path_factory.mktemp(b)) for b in BACKENDS}
    yield factories
    for factory in factories.values():
        factory.drop_all()


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


@pytest.fixture
def settings(database_url: str) -> Settings:
    return Settings(database_url=database_url)


@pytest.fixture
async def runtime(settings: Settings) -> AsyncIterator[Runtime]:
    """Direct access to the services and the database, beside the HTTP client."""
    runtime = Runtime.from_settings(settings)
    yield runtime
    await runtime.close()


@pytest.fixture
async def client(settings: Settings) -> AsyncIterator[AsyncTestClient]:
    """The real app over HTTP semantics (ASGI in-process), on this test's database."""
    async with AsyncTestClient(app=create_app(settings)) as test_client:
        yield test_client
