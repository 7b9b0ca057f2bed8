"""A database that cannot be reached is 503 with Retry-After, never a 500 or a hang; and
nothing else is a 503: any other error is a 500 whose traceback goes to the log."""

from __future__ import annotations

import logging
import time
import traceback
from typing import Any

import pytest
from litestar.testing import AsyncTestClient
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from devicecontrol.app import create_app
from devicecontrol.cli.core import run_with_database
from devicecontrol.config import Settings
from devicecontrol.database.engine import Database, DatabaseUnreachable
from devicecontrol.errors import is_database_outage
from devicecontrol.runtime import Runtime
from devicecontrol.users import service as users_service
from tests.factories import logged_in_user

UNREACHABLE = {
    # nothing listens on port 1; the connection is refused at once
    "postgresql": "postgresql://postgres@127.0.0.1:1/devicecontrol",
    "sqlite": "sqlite:////nonexistent-directory/devicecontrol.db",
}


@pytest.mark.parametrize("backend", sorted(UNREACHABLE))
async def test_unreachable_database_is_503_with_retry_after(backend: str) -> None:
    app = create_app(Settings(database_url=UNREACHABLE[backend]))
    async with AsyncTestClient(app=app) as client:
        started = time.monotonic()
        responses = [
            await client.get("/v1/users/me", headers={"Authorization": "Bearer " + "a" * 40}),
            await client.post(
                "/v1/auth/login",
                json={"client_id": "a", "client_secret": "b", "username": "c", "password": "d"},
            ),
        ]
        elapsed = time.monotonic() - started
    for response in responses:
        assert response.status_code == 503, response.text
        assert response.headers["retry-after"].isdigit()
        assert response.headers["content-type"].startswith("application/problem+json")
        body = response.json()
        assert body["status"] == 503
        assert "Traceback" not in response.text and "SELECT" not in response.text
    assert elapsed < 10


# --- what is not an outage: every other error is a 500 with its traceback in the log -------

GENERIC_500 = {
    "type": "about:blank",
    "title": "Internal Server Error",
    "status": 500,
    "detail": "The server could not answer this request.",
}


def unhandled_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "devicecontrol.errors" and r.exc_info]


async def test_an_oserror_that_is_not_the_database_is_a_500_with_a_logged_traceback(
    runtime, client, monkeypatch, caplog
):
    _, headers = await logged_in_user(runtime, client)

    async def broken_profile(*_: Any, **__: Any) -> Any:
        raise FileNotFoundError(2, "No such file", "/srv/devicecontrol/secret-profile.json")

    monkeypatch.setattr(users_service, "get_profile", broken_profile)
    caplog.set_level(logging.INFO, logger="devicecontrol")
    response = await client.get("/v1/users/me", headers=headers)
    assert response.status_code == 500, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    assert "retry-after" not in response.headers
    assert response.json() == GENERIC_500
    assert "secret-profile" not in response.text and "Traceback" not in response.text
    [record] = unhandled_records(caplog)
    assert record.levelno == logging.ERROR
    assert record.exc_info is not None and record.exc_info[0] is FileNotFoundError
    assert "broken_profile" in "".join(traceback.format_exception(*record.exc_info))
    assert not [r for r in caplog.records if "database unavailable" in r.getMessage()]


async def test_a_query_bug_is_a_500_on_both_engines_not_an_outage(
    runtime, client, monkeypatch, caplog
):
    """On SQLite a missing table is an OperationalError too: only unusable files are 503."""
    _, headers = await logged_in_user(runtime, client)

    async def profile_from_a_missing_table(runtime: Runtime, *_: Any, **__: Any) -> Any:
        async with runtime.database.read() as connection:
            await connection.execute(text("SELECT id FROM no_such_table"))

    monkeypatch.setattr(users_service, "get_profile", profile_from_a_missing_table)
    caplog.set_level(logging.INFO, logger="devicecontrol")
    response = await client.get("/v1/users/me", headers=headers)
    assert response.status_code == 500, response.text
    assert response.json() == GENERIC_500
    assert "no_such_table" not in response.text
    [record] = unhandled_records(caplog)
    assert record.exc_info is not None and issubclass(record.exc_info[0], DBAPIError)


async def test_the_drivers_connection_errors_are_named_as_the_database_s():
    """asyncpg raises a refused connection as a bare OSError; db.py names it an outage."""
    database = Database(UNREACHABLE["postgresql"])
    try:
        with pytest.raises(DatabaseUnreachable) as refused:
            async with database.read() as connection:
                await connection.execute(text("SELECT 1"))
    finally:
        await database.dispose()
    assert isinstance(refused.value.orig, ConnectionRefusedError)
    assert is_database_outage(refused.value)
    assert not is_database_outage(ConnectionRefusedError(111, "refused by something else"))
    assert not is_database_outage(FileNotFoundError(2, "No such file"))


def test_the_cli_reports_only_database_errors_as_the_database_s(tmp_path, monkeypatch):
    monkeypatch.delenv("DEVICECONTROL_DATABASE_URL", raising=False)
    url = f"sqlite:///{tmp_path / 'cli.db'}"

    async def reads_a_missing_file(_: Runtime) -> None:
        (tmp_path / "missing.csv").read_text()

    with pytest.raises(FileNotFoundError):
        run_with_database(url, reads_a_missing_file)
