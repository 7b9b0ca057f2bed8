"""devicecontrol db upgrade."""

from __future__ import annotations

import click

from devicecontrol.cli.core import database_option, run_with_database
from devicecontrol.runtime import Runtime


@click.group()
def db() -> None:
    """The database schema."""


@db.command("upgrade")
@database_option
def upgrade(database_url: str | None) -> None:
    """Create the schema, or bring it to the newest revision."""

    async def nothing_more(_: Runtime) -> None:
        return None

    run_with_database(database_url, nothing_more)
    click.echo("The database schema is at the newest revision.")
