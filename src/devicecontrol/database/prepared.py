"""Hot statements: built once with SQLAlchemy, compiled once per database, run by the driver.

SQLAlchemy stays the one way queries are written. What it adds on each execution (the
pool checkout and return, the execution context, the cursor result) cost more than the
query itself on a hot read (docs/PERFORMANCE.md). A ``Prepared`` statement keeps, for each
dialect, the SQL text SQLAlchemy compiled, the order of its parameters and SQLAlchemy's
own bind and result processors (SQLite's text timestamps, for one), and runs on the
driver's connection: sqlite3 and asyncpg both keep prepared statements per connection
(sqlite3's statement cache, asyncpg's), so nothing is parsed twice either.

Readers (``engine.py``) run a ``Prepared`` that way; a write transaction (an ``engine.Writer``)
runs its SQLAlchemy statement as usual, through ``execute`` below.
"""

from __future__ import annotations

import sqlite3
from collections import namedtuple
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.engine import Dialect
from sqlalchemy.sql.base import Executable

Processor = Callable[[Any], Any] | None
_NOTHING = object()  # equal to no parameter value


@dataclass(frozen=True, slots=True)
class CompiledForm:
    """One dialect's compilation: SQL, parameter order, processors, the row type."""

    sql: str
    names: tuple[str, ...]
    literals: dict[str, Any]  # the values the statement itself binds ('melissa', say)
    bind_processors: tuple[Processor, ...]
    processed: tuple[tuple[int, Callable[[Any], Any]], ...]  # (column, its result processor)
    row: type
    # per parameter, the last value a bind processor took and what it made of it
    last_processed: list[tuple[Any, Any]]

    def arguments(self, parameters: Mapping[str, Any]) -> tuple[Any, ...]:
        values = []
        literals = self.literals
        last = self.last_processed
        for index, (name, process) in enumerate(zip(self.names, self.bind_processors, strict=True)):
            value = literals[name] if name in literals else parameters[name]
            if process is not None and value is not None:
                # the same value as last time (``now``, within its second): processed already
                seen, processed = last[index]
                if value != seen:
                    processed = process(value)
                    last[index] = (value, processed)
                value = processed
            values.append(value)
        return tuple(values)

    def rows(self, raw_rows: Sequence[Sequence[Any]]) -> list[Any]:
        make = self.row._make  # type: ignore[attr-defined]
        processed = self.processed
        if not processed:
            return [make(raw) for raw in raw_rows]
        rows = []
        for raw in raw_rows:
            values = list(raw)
            for index, process in processed:
                value = values[index]
                if value is not None:
                    values[index] = process(value)
            rows.append(make(values))
        return rows


class PreparedResult:
    """Rows already fetched, with the accessors of SQLAlchemy's ``Result`` that the hot
    statements' repositories use."""

    __slots__ = ("_rows",)

    def __init__(self, rows: list[Any]) -> None:
        self._rows = rows

    def first(self) -> Any:
        return self._rows[0] if self._rows else None

    def all(self) -> list[Any]:
        return self._rows


class Prepared:
    """A statement built once (with ``bindparam``s), compiled once per dialect."""

    def __init__(self, statement: Executable) -> None:
        self.statement = statement
        self._forms: dict[str, CompiledForm] = {}

    def form(self, dialect: Dialect) -> CompiledForm:
        form = self._forms.get(dialect.name)
        if form is None:
            form = self._forms[dialect.name] = self._compile(dialect)
        return form

    def _compile(self, dialect: Dialect) -> CompiledForm:
        compiled: Any = self.statement.compile(dialect=dialect)  # type: ignore[attr-defined]
        names = tuple(compiled.positiontup or ())
        processors = compiled._bind_processors
        columns = compiled._result_columns
        binds = {name: compiled.binds[name] for name in names}
        return CompiledForm(
            sql=compiled.string,
            names=names,
            literals={name: bind.value for name, bind in binds.items() if not bind.required},
            bind_processors=tuple(processors.get(name) for name in names),
            processed=tuple(
                (index, process)
                for index, process in enumerate(
                    column.type._cached_result_processor(dialect, None) for column in columns
                )
                if process is not None
            ),
            row=namedtuple("PreparedRow", [column.keyname for column in columns]),
            last_processed=[(_NOTHING, None)] * len(names),
        )

    def run_sqlite(
        self, dialect: Dialect, connection: sqlite3.Connection, parameters: Mapping[str, Any]
    ) -> PreparedResult:
        form = self.form(dialect)
        raw_rows = connection.execute(form.sql, form.arguments(parameters)).fetchall()
        return PreparedResult(form.rows(raw_rows))

    async def run_asyncpg(
        self, dialect: Dialect, connection: Any, parameters: Mapping[str, Any]
    ) -> PreparedResult:
        form = self.form(dialect)
        raw_rows = await connection.fetch(form.sql, *form.arguments(parameters))
        return PreparedResult(form.rows(raw_rows))


async def execute(connection: Any, statement: Prepared, parameters: Mapping[str, Any]) -> Any:
    """Run a hot statement on a reader (the driver's way, ``run_prepared``) or, on any
    other connection (a write transaction), as the SQLAlchemy statement it is."""
    run_prepared = getattr(connection, "run_prepared", None)
    if run_prepared is not None:
        return await run_prepared(statement, parameters)
    return await connection.execute(statement.statement, parameters)
