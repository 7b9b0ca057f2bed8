"""What the CLI tests share: running a command off the event loop, and reading the tables."""

from __future__ import annotations

import asyncio
import subprocess
from typing import Any

from sqlalchemy import select

from devicecontrol.runtime import Runtime
from devicecontrol.tables import metadata
from tests.processes import run_cli


async def cli(
    *args: str, database_url: str | None = None, **kwargs: Any
) -> subprocess.CompletedProcess[str]:
    """``devicecontrol ARGS --database-url URL`` as a real process, awaited in a thread."""
    return await asyncio.to_thread(run_cli, *args, database_url=database_url, **kwargs)


def assert_succeeded(result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}\n{result.stderr}"


def assert_one_line_error(result: subprocess.CompletedProcess[str], *fragments: str) -> str:
    """Exit status 1, nothing on stdout, exactly one line on stderr (returned)."""
    assert result.returncode == 1, f"exit {result.returncode}\n{result.stdout}\n{result.stderr}"
    lines = result.stderr.splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got:\n{result.stderr}"
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    for fragment in fragments:
        assert fragment.lower() in lines[0].lower(), lines[0]
    return lines[0]


async def snapshot(runtime: Runtime) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table, to show that a failed command wrote nothing."""
    async with runtime.database.read() as connection:
        return {
            table.name: [
                tuple(row) for row in await connection.execute(select(table).order_by(*table.c))
            ]
            for table in metadata.sorted_tables
        }


async def rows(runtime: Runtime, table: Any, *where: Any) -> list[Any]:
    async with runtime.database.read() as connection:
        query = select(table).where(*where).order_by(table.c.id)
        return list(await connection.execute(query))
