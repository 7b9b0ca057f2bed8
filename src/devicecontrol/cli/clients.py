"""devicecontrol clients create."""

from __future__ import annotations

import click

from devicecontrol.auth.clients import RECOMMENDED_SECRET_LENGTH, create_client, is_weak_secret
from devicecontrol.cli.core import database_option, run_with_database
from devicecontrol.runtime import Runtime


@click.group()
def clients() -> None:
    """OAuth clients (apps and integrations)."""


@clients.command("create")
@click.argument("client_id")
@click.option(
    "--secret",
    default=None,
    help="Any length (under 16 characters gets a warning); generated when omitted.",
)
@database_option
def create(client_id: str, secret: str | None, database_url: str | None) -> None:
    """Register a client and print its secret, once: only a digest is stored."""

    async def work(runtime: Runtime) -> str:
        return await create_client(runtime, client_id, secret=secret)

    issued = run_with_database(database_url, work)
    if secret is not None and is_weak_secret(secret):
        click.echo(
            f"Warning: the secret of {client_id} is shorter than {RECOMMENDED_SECRET_LENGTH} "
            "characters: it names the app rather than proving it (failed attempts are throttled)",
            err=True,
        )
    click.echo(f"client_id: {client_id}")
    click.echo(f"client_secret: {issued}")
    click.echo("Keep the secret now: it is stored only as a digest and cannot be shown again.")
