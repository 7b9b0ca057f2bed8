"""devicecontrol tokens purge."""

from __future__ import annotations

import click

from devicecontrol.cli.core import database_option, run_with_database
from devicecontrol.housekeeping.purge import PurgeReport, purge
from devicecontrol.runtime import Runtime


@click.group()
def tokens() -> None:
    """Access and refresh tokens; their purge also clears old readings and expires commands."""


@tokens.command("purge")
@database_option
def purge_command(database_url: str | None) -> None:
    """Delete expired and revoked tokens, throttle records past every window and readings
    past DEVICECONTROL_READING_RETENTION days (never a controller's latest); store expired
    for overdue commands. serve does the same on its own every DEVICECONTROL_PURGE_INTERVAL.
    """

    async def work(runtime: Runtime) -> PurgeReport:
        return await purge(runtime.database, runtime.settings)

    report = run_with_database(database_url, work)
    click.echo(
        f"Purged {report.access_tokens} access tokens, {report.refresh_tokens} refresh tokens, "
        f"{report.throttle_records} throttle records and {report.readings} readings; "
        f"stored expired for {report.expired_commands} overdue commands."
    )
