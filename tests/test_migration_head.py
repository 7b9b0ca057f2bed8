"""The schema's head as the code names it, and the one query that spares Alembic."""

from __future__ import annotations

from pathlib import Path

from alembic.script import ScriptDirectory
from sqlalchemy import text

from devicecontrol.database.engine import Database
from devicecontrol.database.migrate import (
    HEAD_REVISION,
    alembic_config,
    schema_at_head,
    upgrade_database,
)


def test_head_revision_is_the_newest_migration() -> None:
    scripts = ScriptDirectory.from_config(alembic_config())
    assert scripts.get_heads() == [HEAD_REVISION]


async def test_an_empty_database_is_not_at_head_and_is_migrated_to_it(tmp_path: Path) -> None:
    database = Database(f"sqlite:///{tmp_path / 'new.db'}")
    try:
        assert not await schema_at_head(database)
        await upgrade_database(database)
        assert await schema_at_head(database)
    finally:
        await database.dispose()


async def test_a_database_behind_the_head_is_upgraded(database_url: str) -> None:
    database = Database(database_url)
    try:
        assert await schema_at_head(database)
        async with database.write() as connection:  # as if 0011 had not run
            await connection.execute(text("DROP TABLE reading_fields"))
            await connection.execute(text("UPDATE alembic_version SET version_num = '0010'"))
        assert not await schema_at_head(database)
        await upgrade_database(database)
        assert await schema_at_head(database)
        async with database.read() as connection:
            await connection.execute(text("SELECT count(*) FROM reading_fields"))
    finally:
        await database.dispose()
