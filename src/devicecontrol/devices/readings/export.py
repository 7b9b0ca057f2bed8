"""The readings as CSV: ``created`` first, then every field the readings have, oldest first,
streamed slice by slice so that neither the service nor the database holds the whole
range.

A field's value is written as JSON would show it (a list or an object as JSON text, a
boolean as ``true``/``false``), except that a string is written as it is. A string that a
spreadsheet would take for a formula (it begins with ``=``, ``+``, ``-``, ``@``, a tab or
a carriage return) is written with a leading ``'``, so that opening an export never runs
what a device reported.
"""

from __future__ import annotations

import csv
import io
from collections.abc import AsyncIterator, Sequence
from datetime import datetime
from typing import Any

import msgspec

from devicecontrol.clock import format_timestamp
from devicecontrol.database.engine import Database
from devicecontrol.devices.readings import aggregates
from devicecontrol.devices.readings import repository as readings_repository
from devicecontrol.devices.readings.aggregates import Range

SLICE_ROWS = 5000
MEDIA_TYPE = "text/csv"  # Litestar adds the charset (utf-8) to text types
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
_decode = msgspec.json.decode
_encode = msgspec.json.encode


def cell(value: Any) -> str:
    """One field's value as a CSV cell."""
    if value is None:
        return ""
    if isinstance(value, str):
        return "'" + value if value.startswith(FORMULA_STARTS) else value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    return _encode(value).decode()


def _rows(fields: Sequence[str], batch: Sequence[Any]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")
    for row in batch:
        reading = _decode(row.payload)
        created = format_timestamp(row.created_at)
        writer.writerow([created, *(cell(reading.get(name)) for name in fields)])
    return buffer.getvalue()


async def csv_lines(database: Database, within: Range, *, dialect: str) -> AsyncIterator[bytes]:
    """The header row, then the readings in slices of ``SLICE_ROWS``."""
    async with database.read() as connection:
        names = await aggregates.field_names(connection, within, dialect)
    fields = [name for name in names if name != "created"]  # ours wins, as in the JSON
    yield _rows_header(fields)
    after: tuple[datetime, int] | None = None
    while True:
        async with database.read() as connection:
            batch = await readings_repository.readings_in_order(
                connection,
                within.controller_id,
                within.assignment_id,
                since=within.since,
                until=within.until,
                after=after,
                limit=SLICE_ROWS,
            )
        if not batch:
            return
        yield _rows(fields, batch).encode()
        if len(batch) < SLICE_ROWS:
            return
        after = (batch[-1].created_at, batch[-1].id)


def _rows_header(fields: Sequence[str]) -> bytes:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\r\n").writerow(["created", *fields])
    return buffer.getvalue().encode()
