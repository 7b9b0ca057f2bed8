"""`devicecontrol demo`: demo data into an empty database only, and the walk-through."""

from __future__ import annotations

import sqlite3
from datetime import timedelta

import pytest

from devicecontrol.clock import format_timestamp, utcnow
from devicecontrol.database.tables import (
    clients,
    controller_assignments,
    controllers,
    countries,
    readings,
    users,
)
from devicecontrol.demo import data as demo
from tests.cli.support import (
    assert_one_line_error,
    assert_succeeded,
    cli,
    cli_process,
    connects,
    rows,
    snapshot,
)
from tests.factories import bearer, login, make_client, make_controller, make_user


async def test_demo_fills_an_empty_database_and_prints_the_walkthrough(database_url, runtime):
    result = await cli("demo", database_url=database_url)
    assert_succeeded(result)
    assert result.stdout.rstrip("\n") == demo.walkthrough("http://127.0.0.1:8000").rstrip("\n")
    assert [row.client_id for row in await rows(runtime, clients)] == [demo.DEMO_CLIENT_ID]
    demo_user, friend = await rows(runtime, users)
    assert (demo_user.username, friend.username) == (demo.DEMO_USER, demo.FRIEND_USER)
    assert {c.geoname_id for c in await rows(runtime, countries)} == {727011, 2759794}
    owners = {row.serial_number: row.user_id for row in await rows(runtime, controllers)}
    assert owners == {
        "DEMO-MELISSA-1": demo_user.id,
        "DEMO-PLUG-1": demo_user.id,
        "DEMO-PLUG-2": None,
        "DEMO-BOBBIE-1": None,
        "DEMO-PLUG-3": demo_user.id,
    }
    records = await rows(runtime, controller_assignments)
    assert sorted(r.serial_number for r in records) == [
        "DEMO-MELISSA-1",
        "DEMO-PLUG-1",
        "DEMO-PLUG-3",
    ]
    # every demo device can connect with its published secret, and only with it
    for serial, secret in demo.DEMO_DEVICE_SECRETS.items():
        assert await connects(runtime, serial, secret), serial
        assert not await connects(runtime, serial, secret + "x"), serial


async def test_the_printed_demo_credentials_log_in(database_url, runtime, client):
    assert_succeeded(await cli("demo", database_url=database_url))
    for username, password in (
        (demo.DEMO_USER, demo.DEMO_PASSWORD),
        (demo.FRIEND_USER, demo.FRIEND_PASSWORD),
    ):
        auth = await login(
            client,
            username,
            password=password,
            client_id=demo.DEMO_CLIENT_ID,
            client_secret=demo.DEMO_CLIENT_SECRET,
        )
        response = await client.get("/v1/users/me", headers=bearer(auth["access_token"]))
        assert response.json()["users"]["username"] == username


async def test_the_demo_users_simulated_controllers_come_with_three_days_of_history(
    database_url, runtime, client
):
    assert_succeeded(await cli("demo", database_url=database_url))
    auth = await login(
        client,
        demo.DEMO_USER,
        password=demo.DEMO_PASSWORD,
        client_id=demo.DEMO_CLIENT_ID,
        client_secret=demo.DEMO_CLIENT_SECRET,
    )
    headers = bearer(auth["access_token"])
    kept = {row.controller_id for row in await rows(runtime, readings)}
    by_serial = {row.serial_number: row.id for row in await rows(runtime, controllers)}
    # the hand-played plug and the controllers of nobody have none: their readings are real
    assert kept == {by_serial["DEMO-MELISSA-1"], by_serial["DEMO-PLUG-1"]}
    for serial, field in (("DEMO-MELISSA-1", "temp"), ("DEMO-PLUG-1", "energy_wh")):
        response = await client.get(
            f"/v1/controllers/{serial}/readings/summary",
            params={"every": "1h", "since": format_timestamp(utcnow() - timedelta(days=4))},
            headers=headers,
        )
        assert response.status_code == 200, response.text
        buckets = response.json()["summary"]["buckets"]
        assert sum(bucket["count"] for bucket in buckets) == demo.HISTORY_DAYS * 24 * 60
        assert len({str(bucket[field]) for bucket in buckets}) > 10, serial  # it varies


async def test_demo_creates_the_schema_in_a_new_sqlite_file(tmp_path):
    path = tmp_path / "demo.db"
    assert_succeeded(await cli_process("demo", database_url=f"sqlite:///{path}"))
    with sqlite3.connect(path) as connection:
        assert connection.execute("SELECT count(*) FROM controllers").fetchone() == (5,)


SEEDS = {
    "a user": lambda runtime: make_user(runtime, "ana@example.com"),
    "a client": make_client,
    "a controller": lambda runtime: make_controller(runtime, "SN1"),
}


@pytest.mark.parametrize("seed", SEEDS.values(), ids=SEEDS.keys())
async def test_demo_on_a_database_with_any_data_fails_in_one_line_and_writes_nothing(
    seed, database_url, runtime
):
    await seed(runtime)
    before = await snapshot(runtime)
    result = await cli("demo", database_url=database_url)
    assert_one_line_error(result, "not empty")
    assert await snapshot(runtime) == before


async def test_demo_run_twice_fails_the_second_time_and_keeps_the_first_data(database_url, runtime):
    assert_succeeded(await cli("demo", database_url=database_url))
    before = await snapshot(runtime)
    assert_one_line_error(await cli("demo", database_url=database_url), "not empty")
    assert await snapshot(runtime) == before
