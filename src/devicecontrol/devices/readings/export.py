"""The readings as CSV: ``created`` first, then every field the readings have, oldest first,
streamed slice by slice so that neither the service nor the database holds the whole
range.

A field's value is written as JSON would show it (a list or an object as JSON text, a
boolean as ``true``/``false``), except that a string is written as it is. A string that a
spreadsheet would take for a formula (it begins with ``=``, ``+``, ``-``, ``@``, a tab or
a carriage return) is written with a leading ``'``, so that opening an export never runs
what a device reported; so is a field's name in the header row, since a device chooses it.
Every cell but a number is quoted. A spreadsheet that splits on another separator than the
comma (``;`` is the default in much of Europe; a tab, ``|``) splits a line wherever that
separator is, quotes or not: so inside a string, a formula's first character right after a
separator (and any quotes) gets a ``'`` too, and no piece of a line begins a formula
whichever separator cuts it.
"""

from __future__ import annotations

import asyncio
import csv
import io
import re
from collections.abc import AsyncIterator, Sequence
from typing import Any

import msgspec

from devicecontrol.database.engine import Database
from devicecontrol.devices.readings import aggregates
from devicecontrol.devices.readings import repository as readings_repository
from devicecontrol.devices.readings.aggregates import Range

SLICE_ROWS = 5000
# the cells one slice writes at most: a slice is written on the event loop, between other
# users' requests, so its work is bounded whatever the fields (about 20 ms here)
SLICE_CELLS = 50_000
MEDIA_TYPE = "text/csv"  # Litestar adds the charset (utf-8) to text types
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
# a formula's start after a separator a spreadsheet may split on, and any quotes
_SPLIT_FORMULA = re.compile(r"""([,;\t|]"*)([=+\-@\t\r])""")
_decode = msgspec.json.decode
_encode = msgspec.json.encode


def cell(value: Any) -> Any:
    """One field's value as a CSV cell (the csv module writes numbers as ``repr`` does)."""
    kind = type(value)
    if kind is float or kind is int:
        return value
    if kind is str:
        return _text(value)
    if value is None:
        return ""
    if kind is bool:
        return "true" if value else "false"
    return _encode(value).decode()


def _text(value: str) -> str:
    """A string as a cell no spreadsheet runs (the module's docstring)."""
    value = _SPLIT_FORMULA.sub(r"\1'\2", value)
    return "'" + value if value.startswith(FORMULA_STARTS) else value


def _writer(buffer: io.StringIO) -> Any:
    """Numbers bare, every other cell quoted (the module's docstring)."""
    return csv.writer(buffer, lineterminator="\r\n", quoting=csv.QUOTE_NONNUMERIC)


def _rows(fields: Sequence[str], batch: Sequence[Any]) -> str:
    buffer = io.StringIO()
    writer = _writer(buffer)
    decode = _decode
    writer.writerows(
        [row.created, *[cell(reading.get(name)) for name in fields]]
        for row in batch
        for reading in (decode(row.payload),)
    )
    return buffer.getvalue()


async def csv_lines(database: Database, within: Range, *, dialect: str) -> AsyncIterator[bytes]:
    """The header row, then the readings in slices of ``SLICE_ROWS``; the next slice is
    read while this one is written and sent."""
    async with database.read() as connection:
        names = await aggregates.field_names(connection, within, dialect)
    fields = [name for name in names if name != "created"]  # ours wins, as in the JSON
    yield _rows_header(fields)
    rows = slice_rows(len(fields))
    pending: asyncio.Future[list[Any]] | None = asyncio.ensure_future(
        _slice(database, within, None, rows)
    )
    try:
        while pending is not None:
            batch = await pending
            pending = None
            if len(batch) == rows:
                after = (batch[-1].position, batch[-1].id)
                pending = asyncio.ensure_future(_slice(database, within, after, rows))
            if batch:
                yield _rows(fields, batch).encode()
    finally:
        if pending is not None:  # the client went away
            pending.cancel()


def slice_rows(fields: int) -> int:
    """How many readings one slice holds: ``SLICE_ROWS``, fewer when the readings have so
    many fields that it would write more than ``SLICE_CELLS`` cells."""
    return max(1, min(SLICE_ROWS, SLICE_CELLS // (fields + 1)))


async def _slice(
    database: Database, within: Range, after: tuple[Any, int] | None, rows: int
) -> list[Any]:
    async with database.read() as connection:
        return await readings_repository.readings_in_order(
            connection,
            within.controller_id,
            within.assignment_id,
            since=within.since,
            until=within.until,
            after=after,
            limit=rows,
            dialect=database.dialect_name,
        )


def _rows_header(fields: Sequence[str]) -> bytes:
    buffer = io.StringIO()
    _writer(buffer).writerow(["created", *[cell(name) for name in fields]])
    return buffer.getvalue().encode()
