"""Run the Alembic migrations programmatically, on the service's own async engine."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import text
from sqlalchemy.engine import Connection

from devicecontrol.database.engine import Database

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
# any constant works; it only has to be the same in every process that migrates
_POSTGRES_MIGRATION_LOCK = 0x64657663


def alembic_config(connection: Connection | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.attributes["connection"] = connection
    return config


def _upgrade(connection: Connection) -> None:
    if connection.dialect.name == "postgresql":
        # several processes starting at once must not migrate concurrently
        connection.execute(
            text("SELECT pg_advisory_xact_lock(:key)"), {"key": _POSTGRES_MIGRATION_LOCK}
        )
    command.upgrade(alembic_config(connection), "head")


async def upgrade_database(database: Database) -> None:
    """Bring the schema to the newest revision; a no-op when it is already there.

    On PostgreSQL the migration gets its own connection without the request path's
    statement timeout: building an index on a large fleet, or waiting for another process's
    migration lock, may rightly take longer than any request should.
    """
    if database.is_sqlite:
        async with database.write() as connection:
            await connection.run_sync(_upgrade)
        return
    migrator = Database(database.url, command_timeout_s=None)
    try:
        async with migrator.write() as connection:
            await connection.run_sync(_upgrade)
    finally:
        await migrator.dispose()
