"""Registering controllers: one at a time (``controllers add``) or from a CSV file.

An import runs in one transaction, streamed a batch at a time. A file with a bad row writes
nothing unless the caller chose to skip bad rows: the transaction is rolled back, after
every row has still been checked so that each bad line is reported. A serial already
registered with the same stated values is left alone, so importing the same file (or an
export) twice is harmless; one registered with other values is a bad row, never an update.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import islice
from pathlib import Path

from sqlalchemy.exc import IntegrityError

from devicecontrol.clock import utcnow
from devicecontrol.controllers import registry_repository, repository
from devicecontrol.controllers.bulk import BatchImport, ImportReport
from devicecontrol.controllers.csvfile import open_rows
from devicecontrol.controllers.spec import ControllerSpec, parse_spec
from devicecontrol.errors import Conflict, InvalidField
from devicecontrol.runtime import Runtime
from devicecontrol.users.identity import username_key

__all__ = ["ControllerSpec", "ImportReport", "add_controller", "import_controllers", "parse_spec"]

# rows checked and inserted per round: a few queries each, and a bounded PostgreSQL statement
IMPORT_BATCH_ROWS = 5000


class _RollBack(Exception):
    """Ends the import's transaction without writing: some row was bad."""


def _already_registered(serial_number: str) -> Conflict:
    return Conflict(f"serial number {serial_number} is already registered")


async def add_controller(runtime: Runtime, spec: ControllerSpec) -> None:
    """Register one controller; an existing serial number is an error.

    The device secret is stored as stated (only its digest); choosing one when the operator
    gave none is the caller's decision (``controllers add`` generates one).
    """
    now = utcnow()
    try:
        async with runtime.database.write() as connection:
            if await repository.find_by_serial(connection, spec.serial_number) is not None:
                raise _already_registered(spec.serial_number)
            owner_id = None
            if spec.owner is not None:
                key = username_key(spec.owner)
                account = (await registry_repository.accounts_by_key(connection, [key])).get(key)
                if account is None or not account.active:
                    raise InvalidField("owner", f"no active account is named {spec.owner}")
                owner_id = account.id
            values = spec.row_values(owner_id, now)
            controller = await repository.insert_controller(connection, values)
            if owner_id is not None:
                await repository.insert_assignment(
                    connection, controller, user_id=owner_id, room_id=spec.room_id, now=now
                )
    except IntegrityError:
        # PostgreSQL: another command registered this serial since it was looked up
        raise _already_registered(spec.serial_number) from None


async def import_controllers(
    runtime: Runtime,
    path: Path,
    *,
    skip_invalid: bool,
    on_lines_read: Callable[[int], None] | None = None,
) -> ImportReport:
    """Check every row and register the good ones, in one transaction.

    ``on_lines_read`` hears the file's line number after each batch (for a progress bar).
    """
    report = ImportReport()
    with open_rows(path) as rows:
        try:
            async with runtime.database.write() as connection:
                batches = BatchImport(connection, report, now=utcnow(), skip_invalid=skip_invalid)
                while batch := list(islice(rows, IMPORT_BATCH_ROWS)):
                    await batches.add(batch)
                    if on_lines_read is not None:
                        on_lines_read(batch[-1][0])
                if not batches.writing:
                    raise _RollBack
        except _RollBack:
            report.rolled_back()
        except IntegrityError:
            # PostgreSQL: another import registered one of these serials since it was checked
            raise Conflict(
                f"{path}: another command registered some of these serial numbers "
                "meanwhile; nothing was imported (run it again)"
            ) from None
    return report
