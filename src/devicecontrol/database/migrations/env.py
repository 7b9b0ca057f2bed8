"""Alembic environment: migrations run on a connection handed in by devicecontrol.migrate.

For ``alembic`` on the command line (writing a new revision), the URL comes from
DEVICECONTROL_DATABASE_URL.
"""

from __future__ import annotations

import asyncio

from alembic import context
from sqlalchemy.engine import Connection

from devicecontrol.config import load_settings
from devicecontrol.database.engine import Database
from devicecontrol.database.tables import metadata


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        render_as_batch=True,  # SQLite alters tables by copying them
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


async def _run_from_settings() -> None:
    database = Database(load_settings().database_url)
    try:
        async with database.write() as connection:
            await connection.run_sync(_run)
    finally:
        await database.dispose()


connection = context.config.attributes.get("connection")
if connection is not None:
    _run(connection)
else:
    asyncio.run(_run_from_settings())
