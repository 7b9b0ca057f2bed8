"""Contract §9's promise to a device, tested by killing the service: a QoS 1 reading that
was acknowledged (PUBACK) is in the database, whatever happens to the link afterwards.

Devices publish QoS 1 readings with a sequence number through a real ``serve``; the test
keeps what each PUBACK acknowledged. Then it holds a write lock on the readings for a
moment (the database is slow: a backlog builds up), kills the device link's process with
SIGKILL while it holds it, and reads the database. A link that acknowledged on arrival
loses that backlog; this one acknowledged none of it.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time

import aiomqtt
import msgspec
from sqlalchemy import select

from devicecontrol.clock import utcnow
from devicecontrol.database.tables import controllers, readings
from devicecontrol.devices import identity, repository
from tests.devices.link.support import (
    SECRET,
    eventually,
    forget_dropped_connection,
    writes_locked,
)
from tests.devices.link.test_serve import database, link_processes, mqtt_environment
from tests.factories import make_controller
from tests.processes import running_server

DEVICES = 20
PER_DEVICE_INTERVAL_S = 0.06  # within the message rate (20 a second)
FLOW_S = 1.0  # before the lock
LOCKED_S = 1.0  # before the kill
PUBLISH_FOR_S = 4.0


def serial(n: int) -> str:
    return f"PROMISE-{n:03d}"


async def provision(database_url: str) -> None:
    async with database(database_url) as runtime:
        for n in range(DEVICES):
            await make_controller(runtime, serial(n))
            async with runtime.database.write() as connection:
                await repository.set_device_secret(
                    connection, serial(n), identity.device_secret_digest(SECRET), utcnow()
                )


async def publish_until_cut_off(port: int, n: int, acknowledged: set[tuple[str, int]]) -> None:
    """Readings 0, 1, 2, ... until the time is up or the connection ends; each one whose
    publish returned (its PUBACK came) goes into ``acknowledged``."""
    sn = serial(n)
    client = aiomqtt.Client(
        "127.0.0.1", port, identifier=sn, username=sn, password=SECRET, timeout=5
    )
    deadline = time.monotonic() + PUBLISH_FOR_S
    try:
        async with client:
            seq = 0
            while time.monotonic() < deadline:
                body = msgspec.json.encode({"seq": seq, "power": [float(seq)]})
                await client.publish(f"devices/{sn}/state", body, qos=1)
                acknowledged.add((sn, seq))
                seq += 1
                await asyncio.sleep(PER_DEVICE_INTERVAL_S)
    except aiomqtt.MqttError:
        return  # the link was killed: what was acknowledged so far is the promise
    finally:  # a publish waiting for its PUBACK at the kill is cancelled instead
        forget_dropped_connection(client)


async def stored(database_url: str) -> set[tuple[str, int]]:
    async with database(database_url) as runtime, runtime.database.read() as connection:
        rows = await connection.execute(
            select(controllers.c.serial_number, readings.c.payload).join(
                controllers, controllers.c.id == readings.c.controller_id
            )
        )
        return {(row.serial_number, msgspec.json.decode(row.payload)["seq"]) for row in rows}


async def test_every_acknowledged_reading_survives_a_sigkill_of_the_link(database_url, tmp_path):
    await provision(database_url)
    port, env = mqtt_environment()
    acknowledged: set[tuple[str, int]] = set()
    with running_server(database_url, tmp_path, env=env, device_link=True) as server:
        [link_pid] = await eventually(lambda: link_processes(server))
        devices = [
            asyncio.create_task(publish_until_cut_off(port, n, acknowledged))
            for n in range(DEVICES)
        ]
        await asyncio.sleep(FLOW_S)
        async with writes_locked(database_url, "readings"):
            flowing = len(acknowledged)
            await asyncio.sleep(LOCKED_S)
            os.kill(link_pid, signal.SIGKILL)
        # a publish in flight at the kill never gets its PUBACK: it was not promised
        await asyncio.wait(devices, timeout=1.0)
        for task in devices:
            task.cancel()
        await asyncio.gather(*devices, return_exceptions=True)
    assert flowing > DEVICES * 5  # the flow was real before the lock
    missing = acknowledged - await stored(database_url)
    assert not missing, f"{len(missing)} acknowledged readings lost: {sorted(missing)[:10]}"
