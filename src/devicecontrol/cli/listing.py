"""How ``controllers list`` and ``users list`` print: a rich table, or CSV or JSON for scripts.

Values go into the table as plain ``Text``: a name such as ``[red]x`` or one holding
terminal control codes is shown as it is, never interpreted.
"""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from devicecontrol.clock import format_timestamp

FORMATS = ("table", "csv", "json")
DEFAULT_LIMIT = 50
MAX_LIMIT = 10_000
# captured or piped output has no width: let a table keep its natural one instead of 80
_UNBOUNDED_WIDTH = 10_000

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True, slots=True)
class Column:
    key: str  # the CSV header and JSON member
    title: str  # the table's heading
    numeric: bool = False


def listing_options(command: F) -> F:
    """``--limit`` and ``--format``, shared by the list commands."""
    command = click.option(
        "--format",
        "output_format",
        type=click.Choice(FORMATS),
        default="table",
        show_default=True,
        help="table for people; csv or json for scripts.",
    )(command)
    return click.option(
        "--limit",
        type=click.IntRange(1, MAX_LIMIT),
        default=DEFAULT_LIMIT,
        show_default=True,
        help="At most this many rows; a note says how many more match.",
    )(command)


def _as_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, datetime):
        return format_timestamp(value) or ""
    return str(value)


def _as_csv(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return _as_text(value)


def _as_json(value: Any) -> Any:
    return format_timestamp(value) if isinstance(value, datetime) else value


def _remainder_note(noun: str, shown: int, total: int) -> str | None:
    if total <= shown:
        return None
    more = total - shown
    return f"{shown} of {total} {noun} shown; {more} more: raise --limit or narrow the filters"


def _table(noun: str, columns: Sequence[Column], records: list[dict[str, Any]]) -> Table:
    table = Table(title=f"{noun} ({len(records)})", title_justify="left")
    for column in columns:
        table.add_column(column.title, justify="right" if column.numeric else "left")
    for record in records:
        table.add_row(*(Text(_as_text(record[c.key]) or "-") for c in columns))
    return table


def print_listing(
    noun: str,
    columns: Sequence[Column],
    records: list[dict[str, Any]],
    *,
    total: int,
    output_format: str,
) -> None:
    """The records in the chosen format; how many more match goes below a table, or to
    stderr for CSV and JSON so that their output stays parseable."""
    note = _remainder_note(noun, len(records), total)
    if output_format == "table":
        if records:
            console = Console(width=None if sys.stdout.isatty() else _UNBOUNDED_WIDTH)
            console.print(_table(noun, columns, records))
        else:
            click.echo(f"no {noun} match")
        if note:
            click.echo(note)
        return
    if output_format == "csv":
        writer = csv.writer(sys.stdout, lineterminator="\n")
        writer.writerow(c.key for c in columns)
        writer.writerows([_as_csv(r[c.key]) for c in columns] for r in records)
    else:
        data = [{c.key: _as_json(r[c.key]) for c in columns} for r in records]
        click.echo(json.dumps(data, ensure_ascii=False, indent=2))
    if note:
        click.echo(note, err=True)
