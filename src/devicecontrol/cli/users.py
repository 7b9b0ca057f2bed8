"""devicecontrol users create | set-password | disable."""

from __future__ import annotations

import click

from devicecontrol.cli.core import database_option, password_option, run_with_database
from devicecontrol.runtime import Runtime
from devicecontrol.users import service


@click.group()
def users() -> None:
    """User accounts."""


@users.command("create")
@click.argument("email")
@password_option
@click.option("--firstname", default="", help="Given name.")
@click.option("--lastname", default="", help="Family name.")
@click.option("--phone", default=None, help="Phone number, e.g. +359 2 123 4567.")
@click.option("--country", default=None, help="ISO country code; alone, the capital is the city.")
@click.option("--city", default=None, help="City in that country (GeoNames name).")
@database_option
def create(
    email: str,
    password: str,
    firstname: str,
    lastname: str,
    phone: str | None,
    country: str | None,
    city: str | None,
    database_url: str | None,
) -> None:
    """Create an account; EMAIL is its username."""

    async def work(runtime: Runtime) -> int:
        return await service.create_user(
            runtime,
            email,
            password=password,
            firstname=firstname,
            lastname=lastname,
            phone=phone,
            country=country,
            city=city,
        )

    user_id = run_with_database(database_url, work)
    click.echo(f"created user {user_id}: {email}")


@users.command("set-password")
@click.argument("email")
@password_option
@database_option
def set_password(email: str, password: str, database_url: str | None) -> None:
    """Set a new password; the user's tokens stop working at once."""

    async def work(runtime: Runtime) -> None:
        await service.set_password(runtime, email, password=password)

    run_with_database(database_url, work)
    click.echo(f"password set for {email}; their tokens are revoked")


@users.command("disable")
@click.argument("email")
@database_option
def disable(email: str, database_url: str | None) -> None:
    """Disable an account: no more logins, and its tokens stop working at once."""

    async def work(runtime: Runtime) -> None:
        await service.disable_user(runtime, email)

    run_with_database(database_url, work)
    click.echo(f"disabled {email}; their tokens are revoked")
