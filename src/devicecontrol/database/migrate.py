"""Run the Alembic migrations programmatically, on the service's own async engine.

Every command and every ``serve`` upgrades first, and the schema is nearly always at its
head already: that is one query, and Alembic (0.2 s of imports, then its scripts read) is
loaded only when there is something to do.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError

from devicecontrol.database.engine import Database

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
# the newest migration's revision (tests/test_migration_head.py checks it against the scripts)
HEAD_REVISION = "0011"
# any constant works; it only has to be the same in every process that migrates
_POSTGRES_MIGRATION_LOCK = 0x64657663


def alembic_config(connection: Connection | None = None) -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.attributes["connection"] = connection
    return config


def _upgrade(connection: Connection) -> None:
    from alembic import command

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
    if await schema_at_head(database):
        return
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


async def schema_at_head(database: Database) -> bool:
    """Whether the schema is at HEAD_REVISION; False for an empty database, too."""
    try:
        async with database.read() as connection:
            result = await connection.execute(text("SELECT version_num FROM alembic_version"))
            return [row[0] for row in result] == [HEAD_REVISION]
    except DBAPIError:  # no alembic_version table yet
        return False
