"""devicecontrol tokens purge."""

from __future__ import annotations

import click

from devicecontrol.cli.core import database_option, run_with_database
from devicecontrol.housekeeping import PurgeReport, purge
from devicecontrol.runtime import Runtime


@click.group()
def tokens() -> None:
    """Access and refresh tokens."""


@tokens.command("purge")
@database_option
def purge_command(database_url: str | None) -> None:
    """Delete expired and revoked tokens and throttle records past every window."""

    async def work(runtime: Runtime) -> PurgeReport:
        return await purge(runtime.database, runtime.settings)

    report = run_with_database(database_url, work)
    click.echo(
        f"Purged {report.access_tokens} access tokens, {report.refresh_tokens} refresh tokens "
        f"and {report.throttle_records} throttle records."
    )
