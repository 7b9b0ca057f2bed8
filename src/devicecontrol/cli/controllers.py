"""devicecontrol controllers add | import."""

from __future__ import annotations

from pathlib import Path

import click

from devicecontrol.cli.core import OperatorError, database_option, run_with_database
from devicecontrol.controllers import provisioning
from devicecontrol.errors import InvalidField
from devicecontrol.runtime import Runtime


@click.group()
def controllers() -> None:
    """The controller registry."""


@controllers.command("add")
@click.argument("serial")
@click.option("--mac", required=True, help="12 or 16 hex digits; : - . separators allowed.")
@click.option("--type", "type_", required=True, help="e.g. smart_plug, melissa, bobbie, vicki.")
@click.option("--name", default="", help="Display name.")
@click.option("--firmware", default="", help="Firmware version.")
@click.option("--brand-id", default="1", help="Integer brand id.  [default: 1]")
@click.option("--device-group", default="", help="Device group.")
@click.option("--room-id", default="", help="Integer room id.")
@click.option("--claim-code", default=None, help="Code that must be shown to claim it.")
@click.option("--owner", default=None, help="E-mail of the account that owns it from the start.")
@click.option("--online/--offline", default=False, help="Connectivity flag.  [default: offline]")
@database_option
def add(
    serial: str,
    mac: str,
    type_: str,
    name: str,
    firmware: str,
    brand_id: str,
    device_group: str,
    room_id: str,
    claim_code: str | None,
    owner: str | None,
    online: bool,
    database_url: str | None,
) -> None:
    """Register one controller."""
    try:
        spec = provisioning.parse_spec(
            {
                "serial_number": serial,
                "mac": mac,
                "type": type_,
                "name": name,
                "firmware_version": firmware,
                "brand_id": brand_id,
                "device_group": device_group,
                "room_id": room_id,
                "claim_code": claim_code or "",
                "owner": owner or "",
                "online": "true" if online else "false",
            }
        )
    except InvalidField as exc:
        raise OperatorError(exc.detail) from None

    async def work(runtime: Runtime) -> None:
        await provisioning.add_controller(runtime, spec)

    run_with_database(database_url, work)
    click.echo(f"registered {spec.serial_number} ({spec.type}, {spec.mac})")


@controllers.command("import")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--skip-invalid", is_flag=True, help="Register the good rows, report the bad ones.")
@database_option
def import_(file: Path, skip_invalid: bool, database_url: str | None) -> None:
    """Register controllers from a CSV file whose header names its columns."""

    async def work(runtime: Runtime) -> provisioning.ImportReport:
        return await provisioning.import_controllers(runtime, file, skip_invalid=skip_invalid)

    report = run_with_database(database_url, work)
    for line in report.problem_lines():
        click.echo(line, err=True)
    if report.problems and not skip_invalid:
        raise OperatorError(
            f"{len(report.problems)} bad row(s) in {file}; nothing was imported "
            "(fix them, or pass --skip-invalid)"
        )
    click.echo(
        f"added {report.added}, already registered {report.unchanged}, "
        f"skipped {len(report.problems)} bad row(s)"
    )
