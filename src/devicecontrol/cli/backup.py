"""devicecontrol db backup: a consistent copy of a live SQLite database, taken while it serves.

SQLite's online backup copies the pages under one read snapshot; in WAL mode writers go on
meanwhile, so the service need not stop. Copying the file with ``cp`` instead can catch a
page half-written or miss what still sits in the ``-wal`` file. PostgreSQL has pg_dump.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import click

from devicecontrol.cli.core import OperatorError, database_option
from devicecontrol.config import SettingsError, load_settings
from devicecontrol.database.engine import driver_url

# the backup's read snapshot waits at most this long for a lock (WAL readers rarely wait)
SOURCE_BUSY_TIMEOUT_S = 10.0


def sqlite_file(database_url: str | None) -> Path:
    """The file behind the operator's (or the environment's) URL; other databases are refused."""
    try:
        url = driver_url(load_settings().with_database_url(database_url).database_url)
    except SettingsError as exc:
        raise OperatorError(str(exc)) from None
    if url.get_backend_name() != "sqlite":
        raise OperatorError(
            "db backup copies SQLite databases; back up PostgreSQL with "
            "pg_dump --format=custom (see docs/OPERATIONS.md)"
        )
    return Path(url.database or "")


def backup_sqlite(source: Path, target: Path) -> int:
    """Copy ``source`` into the new file ``target`` (checked, then renamed into place); bytes."""
    if not source.is_file():
        raise OperatorError(f"no SQLite database at {source}")
    if target.exists():
        raise OperatorError(f"{target} exists; back up into a new file")
    partial = target.with_name(target.name + ".partial")
    # mode=ro: the backup can never write to the live database, nor create a missing one
    source_uri = source.resolve().as_uri() + "?mode=ro"
    try:
        with (
            closing(sqlite3.connect(source_uri, uri=True, timeout=SOURCE_BUSY_TIMEOUT_S)) as live,
            closing(sqlite3.connect(partial)) as copy,
        ):
            live.backup(copy)  # all pages in one step: one consistent snapshot
            (check,) = copy.execute("PRAGMA quick_check").fetchone()
        if check != "ok":
            raise OperatorError(f"the copy failed its integrity check: {check}")
        partial.replace(target)
    except sqlite3.Error as exc:
        raise OperatorError(f"backup failed: {exc}") from None
    finally:
        partial.unlink(missing_ok=True)
    return target.stat().st_size


@click.command("backup")
@click.argument("target", type=click.Path(dir_okay=False, path_type=Path))
@database_option
def backup(target: Path, database_url: str | None) -> None:
    """Back up a live SQLite database into TARGET.

    TARGET must be a new file; serve may keep running and writing meanwhile. Restore: stop
    serve, remove the database's -wal and -shm files, copy TARGET into place. PostgreSQL is
    backed up with pg_dump instead.
    """
    source = sqlite_file(database_url)
    size = backup_sqlite(source, target)
    click.echo(f"Backed up {source} to {target} ({size} bytes).")
