"""The provisioning CSV file: its columns, reading it row by row, and writing it safely.

Import and export share one column list, so that an export can be imported again; the
export leaves out ``device_secret``, which it could never fill (only digests are stored).
Rows are streamed both ways: a file of a million controllers is never held in memory at once.
"""

from __future__ import annotations

import csv
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

from devicecontrol.errors import BadRequest

REQUIRED_COLUMNS = ("serial_number", "mac", "type")
OPTIONAL_COLUMNS = (
    "name",
    "firmware_version",
    "brand_id",
    "device_group",
    "room_id",
    "claim_code",
    "owner",
    "online",
    "device_secret",
)
COLUMNS = REQUIRED_COLUMNS + OPTIONAL_COLUMNS
# what an export writes: every column it can fill (claim_code stays, empty, as before)
EXPORT_COLUMNS = tuple(column for column in COLUMNS if column != "device_secret")
_COUNT_CHUNK_BYTES = 1 << 20

NumberedRow = tuple[int, dict[str | None, str | None]]  # (line number, column -> text)


def _header_problem(header: list[str]) -> str | None:
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    unknown = [c for c in header if c not in COLUMNS]
    repeated = sorted({c for c in header if header.count(c) > 1})
    parts = [
        f"{label}: {', '.join(columns)}"
        for label, columns in (
            ("missing column(s)", missing),
            ("unknown column(s)", unknown),
            ("repeated column(s)", repeated),
        )
        if columns
    ]
    return "; ".join(parts) or None


def _numbered(reader: csv.DictReader[str], path: Path) -> Iterator[NumberedRow]:
    try:
        for row in reader:
            yield reader.line_num, row
    except (UnicodeDecodeError, csv.Error) as exc:
        raise BadRequest(f"{path}: not a UTF-8 CSV file ({exc})") from None


@contextmanager
def open_rows(path: Path) -> Iterator[Iterator[NumberedRow]]:
    """The data rows with their line numbers, after the header is checked.

    A row with more fields than the header carries them under the key None. A file that
    cannot be read, or is not UTF-8 CSV, raises ``BadRequest`` (even half-way through).
    """
    try:
        handle = path.open(newline="", encoding="utf-8-sig")
    except OSError as exc:
        raise BadRequest(f"cannot read {path}: {exc.strerror}") from None
    with handle:
        reader = csv.DictReader(handle)
        try:
            header = [h.strip() for h in reader.fieldnames or []]
        except (UnicodeDecodeError, csv.Error) as exc:
            raise BadRequest(f"{path}: not a UTF-8 CSV file ({exc})") from None
        problem = _header_problem(header)
        if problem:
            raise BadRequest(f"{path}: header: {problem}")
        reader.fieldnames = header
        yield _numbered(reader, path)


def count_lines(path: Path) -> int | None:
    """Newlines in the file, for a progress bar's total; None when it cannot be read."""
    try:
        with path.open("rb") as handle:
            chunks = iter(lambda: handle.read(_COUNT_CHUNK_BYTES), b"")
            return sum(chunk.count(b"\n") for chunk in chunks)
    except OSError:
        return None


def row_writer(stream: TextIO) -> Callable[[Iterable[str]], object]:
    """Writes one CSV record: Excel's quoting with ``\\n`` line ends, as ``open_rows`` reads."""
    return csv.writer(stream, lineterminator="\n").writerow


@contextmanager
def replaced_atomically(path: Path) -> Iterator[TextIO]:
    """A text stream that becomes ``path`` only when the block succeeds: never half a file."""
    directory = path.resolve().parent
    try:
        descriptor, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=directory)
    except OSError as exc:
        raise BadRequest(f"cannot write {path}: {exc.strerror}") from None
    try:
        with os.fdopen(descriptor, "w", newline="", encoding="utf-8") as stream:
            yield stream
        try:
            os.replace(temporary, path)
        except OSError as exc:
            raise BadRequest(f"cannot write {path}: {exc.strerror}") from None
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
