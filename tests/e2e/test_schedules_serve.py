"""Schedules fired by real `devicecontrol serve` processes on a real clock (contract §12):
within 5 s of the firing, and once while two processes share one PostgreSQL database.

The minute arithmetic, gaps and repeats are tests/schedules' (with the injectable clock).
Here the firing is made a few seconds ahead so that no test waits for a real minute: a
schedule for the next minute, whose next firing is moved in the database to 3 s from now
when the minute is further off than that. The processes look for it every second
(DEVICECONTROL_SCHEDULE_CHECK=1), as they would for one another process wrote.
"""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncConnection

from devicecontrol.database.tables import schedules
from tests.conftest import POSTGRESQL_ONLY
from tests.e2e.support import ANA, Client, bearer_of, in_database, plugs, provision
from tests.one_shot import ONE_SHOT
from tests.processes import running_servers

APP, PASSWORD = Client("schedule-app", "schedule-client-secret-01234"), "ana-pw-1234567"
AHEAD_S = 2
# two processes racing for each firing: that is the point (SQLite's one writer at a time
# gives it no race to lose); CI always runs the PostgreSQL half
pytestmark = POSTGRESQL_ONLY
FIRINGS = re.compile(r'^devicecontrol_schedule_firings_total\{kind="start"\} (\S+)$', re.M)


def move_next_firing(database_url: str, schedule_id: int, to: datetime) -> None:
    async def move(connection: AsyncConnection) -> None:
        moved = update(schedules).where(schedules.c.id == schedule_id).values(next_fire_at=to)
        await connection.execute(moved)

    in_database(database_url, move)


def firings(base_url: str) -> float:
    found = FIRINGS.search(ONE_SHOT.get(f"{base_url}/metrics", timeout=10).text)
    return float(found.group(1)) if found else 0.0


def test_serve_fires_a_schedule_once_within_5_s(
    backend: str, database_url: str, tmp_path: Path
) -> None:
    provision(database_url, client=APP, users={ANA: PASSWORD}, controllers=plugs(ANA))
    env = {"DEVICECONTROL_SCHEDULE_CHECK": "1"}
    workdirs = [tmp_path / "serve-0", tmp_path / "serve-1"]
    with (
        running_servers(database_url, workdirs, env) as servers,
        httpx.Client(base_url=servers[0].base_url, timeout=10) as http,
    ):
        headers = bearer_of(http, APP, ANA, PASSWORD)
        now = datetime.now(UTC)
        next_minute = (now + timedelta(minutes=1)).strftime("%H:%M")
        made = http.post("/v1/schedules", headers=headers, json={
            "controller_id": "SN-1", "days": "1111111", "from_time": next_minute,
            "time_zone": "UTC", "command_name": "switch_on_off",
            "command_fields": {"state": "on"}})  # fmt: skip
        assert made.status_code == 201, made.text
        schedule = made.json()["schedule"]
        due = datetime.fromisoformat(schedule["next_fire_at"]).replace(tzinfo=UTC)
        if (due - now).total_seconds() > AHEAD_S + 1:
            due = (datetime.now(UTC) + timedelta(seconds=AHEAD_S)).replace(microsecond=0)
            move_next_firing(database_url, schedule["id"], due.replace(tzinfo=None))
        path = f"/v1/schedules/SN-1/{schedule['id']}"
        deadline = time.monotonic() + (due - datetime.now(UTC)).total_seconds() + 10
        while time.monotonic() < deadline:
            fired = http.get(path, headers=headers).json()["schedule"]
            if fired["last_command_id"]:
                break
            time.sleep(0.2)
        assert fired["last_command_id"], fired
        fired_at = datetime.fromisoformat(fired["last_fired_at"]).replace(tzinfo=UTC)
        assert timedelta(0) <= fired_at - due <= timedelta(seconds=5)
        time.sleep(1.2)  # both processes have looked again (each every second)
        commands = http.get("/v1/controllers/SN-1/commands", headers=headers).json()
        assert commands["total"] == 1
        assert commands["_embedded"]["command"][0]["id"] == fired["last_command_id"]
        assert sum(firings(server.base_url) for server in servers) == 1
