"""devicecontrol controllers add | import | export | list | rotate-secret."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

import click

from devicecontrol.auth.clients import RECOMMENDED_SECRET_LENGTH, is_weak_secret
from devicecontrol.cli import device_accounts
from devicecontrol.cli.core import OperatorError, database_option, run_with_database
from devicecontrol.cli.listing import Column, listing_options, print_listing
from devicecontrol.cli.progress import file_progress
from devicecontrol.controllers import provisioning
from devicecontrol.controllers.csvfile import replaced_atomically, row_writer
from devicecontrol.controllers.export import ExportReport, export_controllers
from devicecontrol.controllers.listing import ControllerFilters, list_controllers
from devicecontrol.devices.identity import new_device_secret
from devicecontrol.errors import DomainError, InvalidField
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
@click.option(
    "--online/--offline",
    default=False,
    help="Initial connectivity flag only: once serve runs, the device link sets it "
    "(offline at start-up, online while connected).  [default: offline]",
)
@click.option(
    "--device-secret",
    default=None,
    metavar="S",
    help="The device's MQTT password (under 16 characters gets a warning); generated and "
    "printed once when omitted. Only a digest is stored.",
)
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
    device_secret: str | None,
    database_url: str | None,
) -> None:
    """Register one controller with its device secret (given, or generated and printed once).

    With DEVICECONTROL_MQTT_URL the device's account goes to that broker too; a broker that
    refuses it or cannot be reached fails the command, and nothing is registered.
    """
    if device_secret is not None and not device_secret.strip():
        raise OperatorError("device_secret: must not be empty")
    secret = new_device_secret() if device_secret is None else device_secret
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
                "device_secret": secret,
            }
        )
    except InvalidField as exc:
        raise OperatorError(exc.detail) from None

    async def work(runtime: Runtime) -> None:
        await device_accounts.add_controller(runtime, spec)

    run_with_database(database_url, work)
    if device_secret is not None and is_weak_secret(device_secret):
        click.echo(
            f"Warning: the device secret of {spec.serial_number} is shorter than "
            f"{RECOMMENDED_SECRET_LENGTH} characters: it is easy to guess "
            "(failed connects are throttled)",
            err=True,
        )
    click.echo(f"registered {spec.serial_number} ({spec.type}, {spec.mac})")
    if device_secret is None:
        click.echo(f"device_secret: {secret}")
        click.echo(
            "Keep the device secret now: it is stored only as a digest and cannot be shown "
            "again (controllers rotate-secret gives a new one)."
        )


@controllers.command("import")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--skip-invalid", is_flag=True, help="Register the good rows, report the bad ones.")
@database_option
def import_(file: Path, skip_invalid: bool, database_url: str | None) -> None:
    """Register controllers from a CSV file whose header names its columns.

    Serials already registered with the same values are skipped, so a rerun is harmless.
    The optional device_secret column is stored as a digest; a row without one registers a
    device that cannot connect until rotate-secret gives it a secret. The online column
    only sets the initial value: once serve runs, the device link sets it. A progress bar
    shows on stderr when it is a terminal. With DEVICECONTROL_MQTT_URL every row with a
    device_secret gets its account on that broker; a refusal imports nothing.
    """
    with file_progress("importing", file) as on_lines_read:

        async def work(runtime: Runtime) -> provisioning.ImportReport:
            return await device_accounts.import_controllers(
                runtime, file, skip_invalid=skip_invalid, on_lines_read=on_lines_read
            )

        report = run_with_database(database_url, work)
    for line in report.problem_lines():
        click.echo(line, err=True)
    if report.problems and not skip_invalid:
        raise OperatorError(
            f"{len(report.problems)} bad row(s) in {file}; nothing was imported "
            "(fix them, or pass --skip-invalid)"
        )
    if report.added_with_short_secret:
        click.echo(
            f"Warning: {report.added_with_short_secret} added controller(s) have a device secret "
            f"shorter than {RECOMMENDED_SECRET_LENGTH} characters: easy to guess",
            err=True,
        )
    summary = (
        f"added {report.added}, already registered {report.unchanged}, "
        f"skipped {len(report.problems)} bad row(s)"
    )
    if report.added_without_secret:
        summary += (
            f"; {report.added_without_secret} added without a device secret "
            "(they cannot connect until controllers rotate-secret gives them one)"
        )
    click.echo(summary)


class _OutputClosed(Exception):
    """The reader of stdout went away (``export | head``)."""


def _stdout_records() -> Callable[[Iterable[str]], object]:
    write = row_writer(sys.stdout)

    def write_record(record: Iterable[str]) -> object:
        try:
            return write(record)
        except BrokenPipeError:
            raise _OutputClosed from None

    return write_record


@controllers.command("export")
@click.argument("file", required=False, type=click.Path(dir_okay=False, path_type=Path))
@database_option
def export(file: Path | None, database_url: str | None) -> None:
    """Write every controller as an import CSV, to FILE or else to stdout.

    Claim codes are stored only as digests, so their column is empty; an import reads an
    empty claim_code as "not stated" and keeps the stored one. Device secrets are stored
    only as digests too: there is no device_secret column. FILE appears only once it is
    complete.
    """
    if file is None:
        try:
            report = run_with_database(
                database_url, lambda runtime: export_controllers(runtime, _stdout_records())
            )
            sys.stdout.flush()
        except (_OutputClosed, BrokenPipeError):
            # nothing more can reach the reader; keep the interpreter's final flush quiet
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise OperatorError("stdout was closed before the export finished") from None
        click.echo(_export_summary(report, "stdout"), err=True)
        return
    try:
        with replaced_atomically(file) as stream:
            report = run_with_database(
                database_url, lambda runtime: export_controllers(runtime, row_writer(stream))
            )
    except DomainError as exc:
        raise OperatorError(exc.detail) from None
    click.echo(_export_summary(report, str(file)))


def _export_summary(report: ExportReport, target: str) -> str:
    summary = f"exported {report.controllers} controller(s) to {target}"
    if report.claim_codes_left_out:
        summary += (
            f"; {report.claim_codes_left_out} claim code(s) left empty (stored only as digests)"
        )
    if report.device_secrets_left_out:
        summary += (
            f"; {report.device_secrets_left_out} device secret(s) not exported "
            "(stored only as digests)"
        )
    return summary


@controllers.command("rotate-secret")
@click.argument("serial")
@database_option
def rotate_secret(serial: str, database_url: str | None) -> None:
    """Give a controller a new device secret and print it, alone on the last line.

    The old secret stops working at once (a device connected with it is disconnected).
    Only a digest is stored, so this is the one time the secret can be read. With
    DEVICECONTROL_MQTT_URL that broker takes the new secret first; if it cannot, the old
    secret stays.
    """
    secret = run_with_database(
        database_url, lambda runtime: device_accounts.rotate_device_secret(runtime, serial)
    )
    click.echo(
        f"New device secret of {serial}, shown this once (only a digest is stored); "
        "the old one no longer works:"
    )
    click.echo(secret)


_CONTROLLER_COLUMNS = (
    Column("serial_number", "serial"),
    Column("mac", "MAC"),
    Column("type", "type"),
    Column("name", "name"),
    Column("firmware_version", "firmware"),
    Column("brand_id", "brand", numeric=True),
    Column("device_group", "group"),
    Column("room_id", "room", numeric=True),
    Column("online", "online"),
    Column("owner", "owner"),
    Column("has_claim_code", "claim code"),
    Column("created_at", "registered (UTC)"),
)


@controllers.command("list")
@click.option("--owner", metavar="EMAIL", default=None, help="Owned by this account.")
@click.option("--unowned", is_flag=True, help="Not assigned to anyone.")
@click.option("--type", "type_", default=None, help="Exactly this type, e.g. smart_plug.")
@click.option(
    "--serial-prefix",
    metavar="PREFIX",
    default=None,
    help="Serial number starts so (case-sensitive).",
)
@click.option("--online/--offline", default=None, help="Only connected / disconnected ones.")
@listing_options
@database_option
def list_(
    owner: str | None,
    unowned: bool,
    type_: str | None,
    serial_prefix: str | None,
    online: bool | None,
    limit: int,
    output_format: str,
    database_url: str | None,
) -> None:
    """List controllers, oldest first, narrowed by the filters given."""
    filters = ControllerFilters(
        owner=owner, unowned=unowned, type=type_, serial_prefix=serial_prefix, online=online
    )
    rows, total = run_with_database(
        database_url, lambda runtime: list_controllers(runtime, filters, limit=limit)
    )
    records = [row._asdict() for row in rows]
    for record in records:
        record["has_claim_code"] = bool(record["has_claim_code"])
    print_listing(
        "controllers", _CONTROLLER_COLUMNS, records, total=total, output_format=output_format
    )
