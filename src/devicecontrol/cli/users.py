"""devicecontrol users create | set-password | disable | list."""

from __future__ import annotations

import click

from devicecontrol.cli.core import database_option, password_option, run_with_database
from devicecontrol.cli.listing import Column, listing_options, print_listing
from devicecontrol.runtime import Runtime
from devicecontrol.users import service
from devicecontrol.users.listing import list_users


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
    """Set a new password; the user's tokens end (on running servers within half a second)."""

    async def work(runtime: Runtime) -> None:
        await service.set_password(runtime, email, password=password)

    run_with_database(database_url, work)
    click.echo(f"password set for {email}; their tokens and web sessions are revoked")


@users.command("disable")
@click.argument("email")
@database_option
def disable(email: str, database_url: str | None) -> None:
    """Disable an account: no more logins, and its tokens end (within half a second)."""

    async def work(runtime: Runtime) -> None:
        await service.disable_user(runtime, email)

    run_with_database(database_url, work)
    click.echo(f"disabled {email}; their tokens and web sessions are revoked")


_USER_COLUMNS = (
    Column("id", "id", numeric=True),
    Column("email", "e-mail"),
    Column("firstname", "first name"),
    Column("lastname", "last name"),
    Column("phone", "phone"),
    Column("country_code", "country"),
    Column("city_name", "city"),
    Column("controllers", "controllers", numeric=True),
    Column("created_at", "created (UTC)"),
    Column("disabled_at", "disabled (UTC)"),
)


@users.command("list")
@click.option(
    "--disabled/--active", "disabled", default=None, help="Only disabled / active accounts."
)
@click.option(
    "--email-contains", metavar="TEXT", default=None, help="E-mail contains this, any case."
)
@listing_options
@database_option
def list_(
    disabled: bool | None,
    email_contains: str | None,
    limit: int,
    output_format: str,
    database_url: str | None,
) -> None:
    """List accounts, oldest first, with how many controllers each owns."""
    rows, total = run_with_database(
        database_url,
        lambda runtime: list_users(
            runtime, disabled=disabled, email_contains=email_contains, limit=limit
        ),
    )
    records = [{**row._asdict(), "email": row.username} for row in rows]
    print_listing("users", _USER_COLUMNS, records, total=total, output_format=output_format)
