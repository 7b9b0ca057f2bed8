"""devicecontrol schedules list."""

from __future__ import annotations

import click

from devicecontrol.automations.schedules.listing import list_schedules
from devicecontrol.cli.core import database_option, run_with_database
from devicecontrol.cli.listing import Column, listing_options, print_listing

_SCHEDULE_COLUMNS = (
    Column("next_fire_at", "next (UTC)"),
    Column("next_local", "next (local)"),
    Column("next_command", "fires"),
    Column("serial_number", "serial"),
    Column("owner", "owner"),
    Column("id", "id", numeric=True),
    Column("days", "days (Mon-Sun)"),
    Column("from_time", "from"),
    Column("to_time", "to"),
    Column("time_zone", "time zone"),
    Column("active", "active"),
    Column("last_fired_at", "last fired (UTC)"),
    Column("last_command_id", "last command"),
)


@click.group()
def schedules() -> None:
    """Users' weekly schedules (docs/API.md)."""


@schedules.command("list")
@click.option("--owner", metavar="EMAIL", default=None, help="Made by this account.")
@click.option("--serial", metavar="SERIAL", default=None, help="Of this controller.")
@listing_options
@database_option
def list_(
    owner: str | None, serial: str | None, limit: int, output_format: str, database_url: str | None
) -> None:
    """List schedules by what fires next (inactive ones last)."""
    records, total = run_with_database(
        database_url,
        lambda runtime: list_schedules(runtime, owner=owner, serial_number=serial, limit=limit),
    )
    print_listing("schedules", _SCHEDULE_COLUMNS, records, total=total, output_format=output_format)
