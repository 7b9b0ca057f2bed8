"""``controllers export``: the registry as an import file, streamed in registration order.

The columns are the import's, so an export imported into an empty database (with the
owners' accounts in it) registers the same controllers in the same order, and imported into
the same database changes nothing. Claim codes are stored only as digests: their column is
left empty, which an import reads as "not stated". Device secrets are stored only as
digests too, and the export has no ``device_secret`` column at all: a file without it
imports every row as "no secret stated", so the round trip still holds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from sqlalchemy import Row

from devicecontrol.controllers import registry_repository
from devicecontrol.controllers.csvfile import EXPORT_COLUMNS
from devicecontrol.runtime import Runtime

EXPORT_BATCH_ROWS = 5000


@dataclass
class ExportReport:
    controllers: int = 0
    claim_codes_left_out: int = 0
    device_secrets_left_out: int = 0


def export_record(row: Row) -> list[str]:
    """One controller in the export's columns (``EXPORT_COLUMNS``), as text an import accepts."""
    values = {
        "serial_number": row.serial_number,
        "mac": row.mac,
        "type": row.type,
        "name": row.name,
        "firmware_version": row.firmware_version,
        "brand_id": str(row.brand_id),
        "device_group": row.device_group,
        "room_id": "" if row.room_id is None else str(row.room_id),
        "claim_code": "",
        "owner": row.owner or "",
        "online": "true" if row.online else "false",
    }
    return [values[column] for column in EXPORT_COLUMNS]


async def export_controllers(
    runtime: Runtime, write_record: Callable[[Iterable[str]], object]
) -> ExportReport:
    """Write the header and every controller; memory stays at one batch of rows."""
    report = ExportReport()
    write_record(EXPORT_COLUMNS)
    last_id = 0
    while True:
        async with runtime.database.read() as connection:
            page = await registry_repository.export_page(
                connection, after_id=last_id, limit=EXPORT_BATCH_ROWS
            )
        for row in page:
            write_record(export_record(row))
            report.claim_codes_left_out += bool(row.has_claim_code)
            report.device_secrets_left_out += bool(row.has_device_secret)
        report.controllers += len(page)
        if len(page) < EXPORT_BATCH_ROWS:
            return report
        last_id = page[-1].id
