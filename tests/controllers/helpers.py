"""What the controller tests share: database look-ups and problem-body checks."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
from sqlalchemy import Row, event, select
from sqlalchemy.ext.asyncio import AsyncEngine

from devicecontrol.database.engine import Database
from devicecontrol.database.prepared import Prepared
from devicecontrol.database.tables import controller_assignments, controllers
from devicecontrol.runtime import Runtime
from tests.asgi import app_client

# query strings a paged list refuses with a 400 naming the parameter, and that parameter
BAD_PAGING = [
    ("page=0", "page"), ("page=-1", "page"), ("page=abc", "page"), ("page=1.5", "page"),
    ("page=", "page"), ("page_size=0", "page_size"), ("page_size=-5", "page_size"),
    ("page_size=501", "page_size"), ("page_size=ten", "page_size"),
    ("page_size=99999999999999999999", "page_size"),
]  # fmt: skip
TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$")
CONTROLLER_FIELDS = {
    "user_id",
    "serial_number",
    "mac",
    "firmware_version",
    "name",
    "type",
    "room_id",
    "online",
    "brand_id",
    "controller_log",
    "_links",
}
RECORD_FIELDS = {
    "id",
    "user_id",
    "serial_number",
    "mac",
    "firmware_version",
    "name",
    "type",
    "device_group",
    "status_push",
    "room_id",
    "created",
    "assigned_at",
    "deleted_at",
}


async def controller_row(runtime: Runtime, serial_number: str) -> Row:
    async with runtime.database.read() as connection:
        query = select(controllers).where(controllers.c.serial_number == serial_number)
        return (await connection.execute(query)).one()


async def assignment_rows(runtime: Runtime, serial_number: str) -> list[Row]:
    """Every assignment record of the controller, oldest first."""
    async with runtime.database.read() as connection:
        query = (
            select(controller_assignments)
            .where(controller_assignments.c.serial_number == serial_number)
            .order_by(controller_assignments.c.id)
        )
        return list((await connection.execute(query)).all())


async def active_rows(runtime: Runtime, serial_number: str) -> list[Row]:
    return [r for r in await assignment_rows(runtime, serial_number) if r.deleted_at is None]


def assert_problem(response: httpx.Response, status: int, field: str | None = None) -> dict:
    """An RFC 9457 body with this status; with ``field``, an ``errors`` entry naming it."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    body: dict[str, Any] = response.json()
    assert body["status"] == status
    assert body["type"] == "about:blank"
    assert body["title"] and body["detail"]
    if field is not None:
        assert field in [e["field"] for e in body["errors"]], body
    return body


# a client whose requests really overlap: the app runs on the test's own event loop
concurrent_client = app_client


def stamp(clock: Any) -> str:
    """The fake clock's now, as the API shows times."""
    return clock.now().strftime("%Y-%m-%d %H:%M:%S")


@contextmanager
def counted_statements(database: Database) -> Iterator[list[str]]:
    """Every SQL statement the database runs inside the block (reads and writes)."""
    statements: list[str] = []

    def count(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        statements.append(statement)

    engines = {database.engine, database._reads}
    sync_engines = [e.sync_engine if isinstance(e, AsyncEngine) else e for e in engines]
    for engine in sync_engines:
        event.listen(engine, "before_cursor_execute", count)
    # hot statements run on the driver's connection, past SQLAlchemy's events: each run
    # looks up its compiled form once, which is where they are counted
    compiled_form = Prepared.form

    def counted_form(statement: Prepared, dialect: Any) -> Any:
        form = compiled_form(statement, dialect)
        statements.append(form.sql)
        return form

    Prepared.form = counted_form  # type: ignore[method-assign]
    try:
        yield statements
    finally:
        Prepared.form = compiled_form  # type: ignore[method-assign]
        for engine in sync_engines:
            event.remove(engine, "before_cursor_execute", count)
