"""devicecontrol tokens purge | revoke."""

from __future__ import annotations

import click

from devicecontrol.cli.core import database_option, run_with_database
from devicecontrol.housekeeping.purge import PurgeReport, purge
from devicecontrol.runtime import Runtime
from devicecontrol.users import service as users_service


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


@tokens.command("revoke")
@click.argument("email")
@database_option
def revoke_command(email: str, database_url: str | None) -> None:
    """End every token and web-app session of an account (a lost phone, a shared laptop);
    the account itself stays, and its owner can log in again."""

    async def work(runtime: Runtime) -> None:
        await users_service.revoke_user_tokens(runtime, email)

    run_with_database(database_url, work)
    click.echo(f"revoked every token and web session of {email}")
