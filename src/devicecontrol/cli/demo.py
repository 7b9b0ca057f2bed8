"""devicecontrol demo: fill an empty database with demo data and show how to try it."""

from __future__ import annotations

import click

from devicecontrol.cli.core import OperatorError, database_option, run_with_database
from devicecontrol.demo import data as demo_data
from devicecontrol.runtime import Runtime


async def fill_if_empty(runtime: Runtime) -> bool:
    if not await demo_data.database_is_empty(runtime):
        return False
    await demo_data.fill_demo(runtime)
    return True


@click.command()
@database_option
def demo(database_url: str | None) -> None:
    """Fill an EMPTY database with a demo client, users and controllers."""
    if not run_with_database(database_url, fill_if_empty):
        raise OperatorError("the database is not empty; demo data goes only into an empty one")
    click.echo(demo_data.walkthrough("http://127.0.0.1:8000"))
