"""`devicecontrol db upgrade`, the database URL's three sources, and the CLI's error shape."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import inspect, text
from sqlalchemy.engine import make_url

from devicecontrol.database.tables import clients, metadata
from tests.cli.support import (
    assert_one_line_error,
    assert_succeeded,
    cli,
    cli_process,
    rows,
    snapshot,
)
from tests.factories import make_client

SCHEMA_TABLES = {table.name for table in metadata.sorted_tables} | {"alembic_version"}


def sqlite_tables(path: Path) -> set[str]:
    with sqlite3.connect(path) as connection:
        found = connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        return {name for (name,) in found}


async def test_db_upgrade_creates_the_schema_in_a_new_sqlite_file(tmp_path):
    path = tmp_path / "new" / "fresh.db"
    path.parent.mkdir()
    result = await cli("db", "upgrade", database_url=f"sqlite:///{path}")
    assert_succeeded(result)
    assert sqlite_tables(path) >= SCHEMA_TABLES


async def test_db_upgrade_creates_the_schema_in_an_empty_database(database_url, runtime):
    async with runtime.database.write() as connection:
        await connection.run_sync(metadata.drop_all)
        await connection.execute(text("DROP TABLE alembic_version"))
    result = await cli("db", "upgrade", database_url=database_url)
    assert_succeeded(result)
    async with runtime.database.write() as connection:
        names = await connection.run_sync(lambda sync: set(inspect(sync).get_table_names()))
    assert names >= SCHEMA_TABLES


async def test_db_upgrade_rerun_is_harmless_and_keeps_the_data(database_url, runtime):
    await make_client(runtime)
    before = await snapshot(runtime)
    for _ in range(2):
        assert_succeeded(await cli("db", "upgrade", database_url=database_url))
    assert await snapshot(runtime) == before


POSTGRESQL_URL = os.environ.get("DEVICECONTROL_TEST_POSTGRESQL_URL", "").strip()
MISSING_POSTGRESQL_DATABASE = (
    [
        (
            make_url(POSTGRESQL_URL).set(database="dctest_never_created").render_as_string(False),
            'database "dctest_never_created" does not exist',
        )
    ]
    if POSTGRESQL_URL
    else []
)


@pytest.mark.parametrize(
    ("url", "fragment"),
    [
        *MISSING_POSTGRESQL_DATABASE,
        ("mysql://root@127.0.0.1/devicecontrol", "unsupported database"),
        ("not a url at all", "not a database URL"),
        ("sqlite://", "must name a file"),
        ("postgresql://postgres@127.0.0.1:1/nothing", "database unavailable"),
        ("sqlite:////nonexistent-directory/x/devicecontrol.db", "database unavailable"),
        ("sqlite:////tmp", "database unavailable"),
    ],
)
async def test_db_upgrade_on_an_unusable_url_fails_in_one_line(url, fragment, tmp_path):
    result = await cli("db", "upgrade", database_url=url, cwd=tmp_path)
    assert_one_line_error(result, fragment)
    assert list(tmp_path.iterdir()) == []


async def test_an_unopenable_sqlite_file_fails_in_one_line_even_when_many_run_at_once(tmp_path):
    # aiosqlite's worker thread once raced the closing event loop and printed a traceback:
    # real processes, as only one in-process command runs at a time
    url = f"sqlite:///{tmp_path / 'missing-directory' / 'x.db'}"
    results = await asyncio.gather(
        *(cli_process("db", "upgrade", database_url=url) for _ in range(8))
    )
    for result in results:
        assert_one_line_error(result, "database unavailable")


async def test_the_environment_variable_names_the_database_when_no_option_does(
    database_url, runtime
):
    result = await cli_process(  # the variable as a real process starts with it
        "clients", "create", "env-app", env={"DEVICECONTROL_DATABASE_URL": database_url}
    )
    assert_succeeded(result)
    assert [row.client_id for row in await rows(runtime, clients)] == ["env-app"]


async def test_the_option_wins_over_the_environment_variable(database_url, runtime, tmp_path):
    elsewhere = tmp_path / "elsewhere.db"
    result = await cli(
        "clients",
        "create",
        "option-app",
        database_url=database_url,
        env={"DEVICECONTROL_DATABASE_URL": f"sqlite:///{elsewhere}"},
    )
    assert_succeeded(result)
    assert [row.client_id for row in await rows(runtime, clients)] == ["option-app"]
    assert not elsewhere.exists()


async def test_without_option_or_variable_the_database_is_devicecontrol_db_in_the_cwd(tmp_path):
    result = await cli_process("clients", "create", "default-app", cwd=tmp_path)
    assert_succeeded(result)
    with sqlite3.connect(tmp_path / "devicecontrol.db") as connection:
        assert connection.execute("SELECT client_id FROM clients").fetchall() == [("default-app",)]


@pytest.mark.parametrize(
    "variables",
    [
        {"DEVICECONTROL_ACCESS_TOKEN_TTL": "abc"},
        {"DEVICECONTROL_REFRESH_TOKEN_TTL": "0"},
        {"DEVICECONTROL_DEFAULT_PAGE_SIZE": "-5"},
        {"DEVICECONTROL_MAX_PAGE_SIZE": "1.5"},
        {"DEVICECONTROL_LOG_LEVEL": "loud"},
        {"DEVICECONTROL_DEFAULT_PAGE_SIZE": "50", "DEVICECONTROL_MAX_PAGE_SIZE": "20"},
    ],
    ids=lambda variables: ",".join(f"{k[14:]}={v}" for k, v in variables.items()),
)
async def test_a_bad_setting_fails_in_one_line_naming_it_and_writes_nothing(
    variables, database_url, runtime
):
    before = await snapshot(runtime)
    result = await cli("clients", "create", "app", database_url=database_url, env=variables)
    assert_one_line_error(result, *variables)
    assert await snapshot(runtime) == before


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["bogus"], "No such command 'bogus'"),
        (["users", "rename", "a@example.com"], "No such command 'rename'"),
        (["db", "upgrade", "--bogus"], "No such option"),
        (["clients", "create"], "Missing argument"),
        (["controllers", "add", "SN1", "--type", "melissa"], "--mac"),
        (["serve", "--port", "99999"], "--port"),
        (["serve", "--workers", "0"], "--workers"),
    ],
)
async def test_unknown_commands_and_bad_options_fail_in_one_line_with_status_1(
    args, fragment, tmp_path
):
    result = await cli(*args, cwd=tmp_path)
    assert_one_line_error(result, fragment)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("args", [[], ["users"], ["--help"]])
async def test_without_a_command_the_help_is_printed(args, tmp_path):
    result = await cli(*args, cwd=tmp_path)
    assert_succeeded(result)
    assert "Usage:" in result.stdout
    assert "Commands:" in result.stdout
    assert result.stderr == ""


def test_the_installed_script_is_the_same_command_line():
    script = Path(sys.executable).with_name("devicecontrol")
    assert script.exists(), f"no devicecontrol script beside {sys.executable}"
    result = subprocess.run(
        [str(script), "--version"], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0
    assert result.stdout.startswith("devicecontrol, version ")
