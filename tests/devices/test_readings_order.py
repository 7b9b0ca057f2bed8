"""Several link processes store one device's messages side by side (contract §9, several
link processes), so one that arrived earlier may commit later: the controller's latest
reading and ``last_seen`` only move forward in arrival time, and the history lists by
arrival, never by storing order, on both engines."""

from __future__ import annotations

import csv
import io
from datetime import datetime

import msgspec
from sqlalchemy import select

from devicecontrol.database.tables import controllers, latest_readings, readings
from devicecontrol.devices import repository
from devicecontrol.devices.readings import export
from devicecontrol.devices.readings import repository as readings_repository
from devicecontrol.devices.readings.repository import ArrivedReading
from devicecontrol.runtime import Runtime
from tests.devices.helpers import ANA, device_row
from tests.factories import logged_in_user, make_controller

SERIAL = "PLUG-ORDER"
EARLIER = datetime(2026, 3, 1, 12, 0, 0, 300_000)
LATER = datetime(2026, 3, 1, 12, 0, 0, 700_000)  # the same second: only microseconds tell
LATEST = datetime(2026, 3, 1, 12, 0, 5)
READINGS = f"/v1/controllers/{SERIAL}/readings"
# five readings sent ~10 ms apart, handed round robin to two links: each link stores its
# own, so the history holds them in the order 2, 3, 4, 0, 1 of arrival
SENT = [datetime(2026, 3, 1, 12, 0, 1, 10_000 * number) for number in range(5)]
STORED = (2, 3, 4, 0, 1)


async def store(runtime: Runtime, reading: str, arrived_at: datetime) -> None:
    """One link's batch of one reading, in a transaction of its own."""
    device = await device_row(runtime, SERIAL)
    async with runtime.database.write() as connection:
        payload = msgspec.json.encode({"seq": reading}).decode()
        await readings_repository.insert_readings(
            connection, [ArrivedReading(device.id, payload, arrived_at)]
        )


async def latest_and_last_seen(runtime: Runtime) -> tuple[str, datetime, datetime]:
    """The latest reading's ``seq`` and arrival, and the controller's ``last_seen``."""
    async with runtime.database.read() as connection:
        query = select(
            latest_readings.c.payload, latest_readings.c.created_at, controllers.c.last_seen
        ).join(controllers, controllers.c.id == latest_readings.c.controller_id)
        row = (await connection.execute(query.where(controllers.c.serial_number == SERIAL))).one()
    return msgspec.json.decode(row.payload)["seq"], row.created_at, row.last_seen


async def store_out_of_arrival_order(runtime: Runtime) -> None:
    for number in STORED:
        await store(runtime, str(number), SENT[number])


def seqs(response) -> list[str]:
    assert response.status_code == 200, response.text
    return [reading["seq"] for reading in response.json()["_embedded"]["reading"]]


async def history(runtime: Runtime) -> list[str]:
    async with runtime.database.read() as connection:
        rows = await connection.execute(select(readings.c.payload).order_by(readings.c.id))
        return [msgspec.json.decode(row.payload)["seq"] for row in rows]


async def test_an_older_reading_stored_after_a_newer_one_leaves_the_newer_latest_and_last_seen(
    runtime,
):
    await make_controller(runtime, SERIAL)
    await store(runtime, "later", LATER)
    await store(runtime, "earlier", EARLIER)  # another link's, committed after
    assert await latest_and_last_seen(runtime) == ("later", LATER, LATER)
    assert await history(runtime) == ["later", "earlier"]  # stored all the same
    await store(runtime, "latest", LATEST)
    assert await latest_and_last_seen(runtime) == ("latest", LATEST, LATEST)


async def test_of_two_readings_with_one_arrival_time_the_one_stored_last_is_latest(runtime):
    """One link stamps a second reading with the same time (a coarse clock): its own order
    of storing is the order of arrival."""
    await make_controller(runtime, SERIAL)
    await store(runtime, "first", LATER)
    await store(runtime, "second", LATER)
    assert await latest_and_last_seen(runtime) == ("second", LATER, LATER)


async def test_a_connect_or_a_result_noted_before_a_stored_reading_keeps_last_seen(runtime):
    """Shard 0 writes a connect (online, with its time) and stores results; another link
    may have stored a later reading of the device meanwhile."""
    await make_controller(runtime, SERIAL)
    await store(runtime, "later", LATER)
    device = await device_row(runtime, SERIAL)
    async with runtime.database.write() as connection:
        changed = await repository.set_presence(connection, {device.id: (True, EARLIER)})
        await repository.touch_last_seen(connection, device.id, EARLIER)
    assert changed == [(device.id, SERIAL, True)]  # online all the same
    assert await latest_and_last_seen(runtime) == ("later", LATER, LATER)
    async with runtime.database.write() as connection:
        await repository.set_presence(connection, {device.id: (True, LATEST)})
    assert (await latest_and_last_seen(runtime))[2] == LATEST


async def test_history_lists_by_arrival_not_by_storing_order(runtime, client):
    """By ``id`` (the old order) this listed 1, 0, 4, 3, 2."""
    _, ana = await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, SERIAL, owner=ANA)
    await store_out_of_arrival_order(runtime)
    assert seqs(await client.get(READINGS, headers=ana)) == ["4", "3", "2", "1", "0"]
    since = SENT[1].strftime("%Y-%m-%d %H:%M:%S")  # the same second as all five
    assert seqs(await client.get(READINGS, params={"since": since}, headers=ana)) == [
        "4",
        "3",
        "2",
        "1",
        "0",
    ]


async def test_pages_follow_arrival_order_with_no_reading_skipped_or_repeated(runtime, client):
    """Small pages, followed by their ``next`` links, cut across readings stored out of
    arrival order; two that arrived at the same microsecond list the one stored last first.
    By ``id`` (the old order) the pages held 5b 5a, 1 0, 4 3, 2."""
    _, ana = await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, SERIAL, owner=ANA)
    await store_out_of_arrival_order(runtime)
    await store(runtime, "5a", LATEST)
    await store(runtime, "5b", LATEST)
    pages = []
    response = await client.get(READINGS, params={"page_size": 2}, headers=ana)
    while True:
        pages.append(seqs(response))
        body = response.json()
        assert (body["total"], body["page_count"]) == (7, 4)
        if "next" not in body["_links"]:
            break
        response = await client.get(body["_links"]["next"]["href"], headers=ana)
    assert pages == [["5b", "5a"], ["4", "3"], ["2", "1"], ["0"]]


async def test_csv_lists_the_pages_readings_oldest_first_across_slices(
    runtime, client, monkeypatch
):
    """The export already read by arrival; the page did not, so the two disagreed (the
    old page listed 1, 0, 4, 3, 2 against the export's 0 to 4). Slices of two cut across
    readings stored out of arrival order."""
    monkeypatch.setattr(export, "SLICE_ROWS", 2)
    _, ana = await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, SERIAL, owner=ANA)
    await store_out_of_arrival_order(runtime)
    response = await client.get(READINGS, params={"format": "csv"}, headers=ana)
    assert response.status_code == 200, response.text
    rows = list(csv.reader(io.StringIO(response.text)))
    assert rows[0] == ["created", "seq"]
    exported = [row[1] for row in rows[1:]]
    assert exported == ["0", "1", "2", "3", "4"]
    assert exported == seqs(await client.get(READINGS, headers=ana))[::-1]
