"""devicecontrol geofences list."""

from __future__ import annotations

import click

from devicecontrol.automations.geofences.listing import list_geofences
from devicecontrol.cli.core import database_option, run_with_database
from devicecontrol.cli.listing import Column, listing_options, print_listing

_GEOFENCE_COLUMNS = (
    Column("id", "id", numeric=True),
    Column("serial_number", "serial"),
    Column("owner", "owner"),
    Column("latitude", "latitude", numeric=True),
    Column("longitude", "longitude", numeric=True),
    Column("radius", "radius (m)", numeric=True),
    Column("enter_command_name", "on enter"),
    Column("enter_command_fields", "enter fields"),
    Column("exit_command_name", "on exit"),
    Column("exit_command_fields", "exit fields"),
    Column("active", "active"),
    Column("enter_push", "enter push"),
    Column("exit_push", "exit push"),
    Column("inside", "phone inside"),
    Column("created_at", "created (UTC)"),
)


@click.group()
def geofences() -> None:
    """Users' geofences (docs/API.md)."""


@geofences.command("list")
@click.option("--owner", metavar="EMAIL", default=None, help="Made by this account.")
@click.option("--serial", metavar="SERIAL", default=None, help="Of this controller.")
@listing_options
@database_option
def list_(
    owner: str | None, serial: str | None, limit: int, output_format: str, database_url: str | None
) -> None:
    """List geofences, oldest first."""
    records, total = run_with_database(
        database_url,
        lambda runtime: list_geofences(runtime, owner=owner, serial_number=serial, limit=limit),
    )
    print_listing("geofences", _GEOFENCE_COLUMNS, records, total=total, output_format=output_format)
