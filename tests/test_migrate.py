"""Migrations are not bound by the request path's statement timeout."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from devicecontrol.database.engine import Database
from devicecontrol.database.migrate import _POSTGRES_MIGRATION_LOCK, upgrade_database
from tests.conftest import POSTGRESQL_ONLY

# the statement timeout and the migration lock exist on PostgreSQL only
pytestmark = POSTGRESQL_ONLY

# short, so that outlasting it costs the suite little; the wait below is three times it
STATEMENT_TIMEOUT_S = 0.3


async def test_a_migration_waits_out_a_lock_longer_than_the_statement_timeout(
    database_url: str,
) -> None:
    database = Database(database_url, command_timeout_s=STATEMENT_TIMEOUT_S)
    dsn = make_url(database_url).set(drivername="postgresql").render_as_string(False)
    holder = await asyncpg.connect(dsn, timeout=10)
    try:
        # an empty database: at the head, the upgrade would need no lock at all
        await holder.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public")
        # another process is migrating: it holds the lock for longer than the timeout
        transaction = holder.transaction()
        await transaction.start()
        await holder.execute("SELECT pg_advisory_xact_lock($1)", _POSTGRES_MIGRATION_LOCK)
        migration = asyncio.create_task(upgrade_database(database))
        await asyncio.sleep(3 * STATEMENT_TIMEOUT_S)  # a bound migration would have failed
        assert not migration.done()
        await transaction.commit()
        await asyncio.wait_for(migration, timeout=30)
        # the request path keeps its bound
        with pytest.raises(TimeoutError):
            async with database.read() as connection:
                await connection.execute(text("SELECT pg_sleep(2)"))
    finally:
        await holder.close()
        await database.dispose()
