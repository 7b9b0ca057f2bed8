"""PostgreSQL going away while devices publish (contract §9, Readings): the link keeps the
devices' connections, acknowledges nothing it could not store, says so once in the log and
in the metrics, and stores everything once the database is back.

The cluster is a private one (tests/pg_instance.py), stopped and started by the test;
never the machine's shared PostgreSQL. The link runs in this process, on that cluster.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import msgspec
import pytest

from devicecontrol.config import Settings
from devicecontrol.database.engine import Database
from devicecontrol.database.migrate import upgrade_database
from devicecontrol.runtime import Runtime
from tests.devices.link.support import (
    device,
    eventually,
    metric,
    provision,
    running_link,
    stored_readings,
)
from tests.pg_instance import PostgresInstance

SERIAL = "PLUG-OUT"
STATE = f"devices/{SERIAL}/state"
DURING_OUTAGE = 5  # readings published while the database is down
OUTAGE_S = 2.0
CANNOT_STORE = "cannot store device messages"


@pytest.fixture
async def cluster_runtime(private_cluster: PostgresInstance) -> AsyncIterator[Runtime]:
    url = await asyncio.to_thread(private_cluster.create_database, "devicecontrol")
    database = Database(url)
    try:
        await upgrade_database(database)
    finally:
        await database.dispose()
    runtime = Runtime.from_settings(Settings(database_url=url))
    yield runtime
    await runtime.close()


def reading(n: int) -> bytes:
    return msgspec.json.encode({"n": n})


async def test_a_database_outage_holds_the_devices_back_and_loses_nothing_acknowledged(
    private_cluster, cluster_runtime, caplog
):
    runtime = cluster_runtime
    caplog.set_level(logging.INFO, logger="devicecontrol")
    await provision(runtime, SERIAL)
    async with running_link(runtime) as link, device(link, SERIAL) as plug:
        await plug.publish(STATE, reading(0), qos=1)  # acknowledged: stored
        assert await stored_readings(runtime, SERIAL) == [{"n": 0}]

        await asyncio.to_thread(private_cluster.stop, "immediate")
        pending = [
            asyncio.create_task(plug.publish(STATE, reading(n), qos=1, timeout=60))
            for n in range(1, DURING_OUTAGE + 1)
        ]
        done, _ = await asyncio.wait(pending, timeout=OUTAGE_S)
        assert not done  # no PUBACK for what cannot be stored
        assert metric("devicecontrol_device_ingest_failing") == 1
        assert metric("devicecontrol_device_ingest_queued") == DURING_OUTAGE
        assert link.connections[SERIAL]  # the device is still connected

        await asyncio.to_thread(private_cluster.start)
        await asyncio.wait_for(asyncio.gather(*pending), 15)  # acknowledged once stored
        stored = await eventually(lambda: stored_readings(runtime, SERIAL), within=15)
        assert stored == [{"n": n} for n in range(DURING_OUTAGE + 1)]  # in order, once each
        assert metric("devicecontrol_device_ingest_failing") == 0
    said = [r.getMessage() for r in caplog.records]
    assert sum(CANNOT_STORE in line for line in said) == 1, said
    assert sum("stores device messages again" in line for line in said) == 1, said
