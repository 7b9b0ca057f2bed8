"""Two link processes on one Mosquitto and one PostgreSQL (contract §9, several link
processes, ``DEVICECONTROL_LINK_SHARD``): the devices' messages split between them by MQTT
shared subscriptions, each stored once, the latest the last one sent; shard 0 alone
follows who is connected and delivers commands. The broker is the private one of
``test_mosquitto_broker.py`` (``conftest.py``), set up as docs/OPERATIONS.md says."""

from __future__ import annotations

import asyncio
import os
import signal
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import aiomqtt
import msgspec
from sqlalchemy import func, select

from devicecontrol.config import MqttUrl
from devicecontrol.database.tables import controllers, readings
from devicecontrol.devices.link.core import DeviceLink
from devicecontrol.devices.link.mosquitto.client import MosquittoBroker
from devicecontrol.devices.link.mosquitto.log_check import PROBE_ID
from devicecontrol.devices.link.mosquitto.shards import (
    SHARED_PUBLICATIONS,
    SessionPlan,
    is_link_client,
    session_plan,
)
from devicecontrol.devices.link.mosquitto.share import MosquittoShare
from devicecontrol.devices.link.mqtt_session.client import Message
from devicecontrol.devices.topics import DEVICE_PUBLICATIONS
from devicecontrol.runtime import Runtime
from tests.conftest import POSTGRESQL_ONLY
from tests.devices.link.support import (
    eventually,
    served_command_status,
    served_token,
    switch_command,
)
from tests.devices.link.test_mosquitto_broker import (
    OFFLINE_WITHIN_S,
    OWNER,
    database,
    device,
    fetch,
    next_command,
    online,
    provision,
)
from tests.factories import make_controller
from tests.mosquitto import SERVICE_PASSWORD, SERVICE_USER, DynsecMosquitto
from tests.one_shot import ONE_SHOT
from tests.processes import Server, running_server

SERIALS = ("SHARE-1", "SHARE-2", "SHARE-3")
READINGS = 6  # per device, one after another: Mosquitto hands them to the links in turn
LAST_AFTER_S = 0.5
TAKEN = 'devicecontrol_device_messages_total{kind="state"}'


def test_each_shard_keeps_a_session_of_its_own_and_only_shard_0_reads_the_log():
    alone, first, second = session_plan((0, 1)), session_plan((0, 2)), session_plan((1, 2))
    assert alone.client_id == first.client_id == "devicecontrol-link"
    assert alone.reads_log and first.reads_log and not second.reads_log
    assert alone.subscribe[-2:] == DEVICE_PUBLICATIONS and alone.unsubscribe == SHARED_PUBLICATIONS
    assert first.subscribe[-2:] == first.shared == SHARED_PUBLICATIONS
    assert second == SessionPlan(
        "devicecontrol-link-1", SHARED_PUBLICATIONS, DEVICE_PUBLICATIONS, reads_log=False
    )
    assert SHARED_PUBLICATIONS[0] == "$share/devicecontrol/devices/+/state"
    # their connect and subscribe lines in the broker's log are no device's
    assert all(map(is_link_client, ("devicecontrol-link", "devicecontrol-link-7", PROBE_ID)))
    assert not is_link_client("devicecontrol-linker") and not is_link_client("PLUG-1")


@contextmanager
def link_serve(broker: DynsecMosquitto, database_url: str, workdir: Path, shard: str):
    workdir.mkdir()
    env = {"DEVICECONTROL_MQTT_URL": broker.url, "DEVICECONTROL_LINK_SHARD": shard}
    with running_server(database_url, workdir, env=env, device_link=True) as server:
        yield server


def taken(server: Server) -> float:
    """The readings this serve's link took (its /metrics)."""
    page = ONE_SHOT.get(f"{server.base_url}/metrics", timeout=10).text
    return sum(float(line.rpartition(" ")[2]) for line in page.splitlines()
               if line.startswith(TAKEN))  # fmt: skip


async def stored(database_url: str) -> list[tuple[str, int]]:
    """(serial, seq) of every stored reading."""
    query = select(controllers.c.serial_number, readings.c.payload).join(controllers)
    async with database(database_url) as runtime, runtime.database.read() as connection:
        rows = await connection.execute(query)
        return [(row.serial_number, msgspec.json.decode(row.payload)["seq"]) for row in rows]


async def count(database_url: str) -> int:
    async with database(database_url) as runtime, runtime.database.read() as connection:
        return int((await connection.execute(select(func.count()).select_from(readings))).one()[0])


async def all_online(database_url: str, expected: bool) -> bool:
    return all([await online(database_url, serial) == expected for serial in SERIALS])


async def send_readings(plug: Any, serial: str, seqs: range) -> None:
    """One reading after another, each acknowledged by Mosquitto (QoS 1) before the next."""
    for seq in seqs:
        await plug.publish(f"devices/{serial}/state", msgspec.json.encode({"seq": seq}), qos=1)


@POSTGRESQL_ONLY
async def test_two_links_share_the_devices_messages_and_shard_0_follows_connections(
    broker, database_url, tmp_path
):
    await provision(broker, database_url, *SERIALS)
    with link_serve(broker, database_url, tmp_path / "shard-0", "0/2") as first:
        async with AsyncExitStack() as stack:
            plugs = [await stack.enter_async_context(device(broker, s)) for s in SERIALS]
            for plug, serial in zip(plugs, SERIALS, strict=True):
                await plug.subscribe(f"devices/{serial}/commands", qos=1)
            await eventually(lambda: all_online(database_url, True))
            # stored by shard 0; its copy, which Mosquitto sends shard 1 as it subscribes, not
            await plugs[0].publish(
                f"devices/{SERIALS[0]}/state", b'{"seq": -1}', qos=1, retain=True
            )
            await eventually(lambda: count(database_url))
            with link_serve(broker, database_url, tmp_path / "shard-1", "1/2") as second:
                assert await all_online(database_url, True)  # shard 1 set no one offline
                for plug, serial in zip(plugs, SERIALS, strict=True):
                    await send_readings(plug, serial, range(READINGS - 1))
                # the last one later than a link's reaction time (ms, more on a busy machine):
                # readings closer than that may be stamped in either order by the two links
                await asyncio.sleep(LAST_AFTER_S)
                for plug, serial in zip(plugs, SERIALS, strict=True):
                    await send_readings(plug, serial, range(READINGS - 1, READINGS))
                total = READINGS * len(SERIALS) + 1
                await eventually(lambda: _at_least(count(database_url), total), within=10)
                await asyncio.sleep(0.3)  # a copy would be stored by now
                expected = sorted(
                    [(SERIALS[0], -1)] + [(s, seq) for s in SERIALS for seq in range(READINGS)]
                )
                assert sorted(await stored(database_url)) == expected  # each once
                shares = [taken(first), taken(second)]
                assert sum(shares) == total and all(shares), shares
                bearer = served_token(first, OWNER)
                for serial in SERIALS:
                    shown = fetch(first, bearer, serial)
                    assert (shown["seq"], shown["online"]) == (READINGS - 1, True), shown
                # made on the second serve, delivered by shard 0, its result stored by either
                made = switch_command(second, bearer, SERIALS[0], "off")
                assert (await next_command(plugs[0]))["id"] == made
                result = msgspec.json.encode({"id": made, "status": "succeeded"})
                await plugs[0].publish(f"devices/{SERIALS[0]}/commands/result", result, qos=1)
                await eventually(
                    lambda: served_command_status(first, bearer, SERIALS[0], made) == "succeeded"
                )
                os.kill(second.process.pid, signal.SIGTERM)  # shard 1 stops: it leaves the group
                assert second.process.wait(timeout=15) == 0, second.stderr()
            # what the devices send now is all shard 0's, none held for shard 1's session
            await send_readings(plugs[1], SERIALS[1], range(READINGS, READINGS + 4))
            await eventually(lambda: _at_least(count(database_url), total + 4))
            assert fetch(first, bearer, SERIALS[1])["seq"] == READINGS + 3
        await eventually(lambda: all_online(database_url, False), within=OFFLINE_WITHIN_S)
    for server in (first, second):
        assert "Traceback" not in server.stderr(), server.stderr()


async def _at_least(value: Any, goal: int) -> bool:
    return await value >= goal


@asynccontextmanager
async def shard_0_link(runtime: Runtime, broker: DynsecMosquitto, shards: int):
    """Shard 0 of ``shards`` links, in this process."""
    url = MqttUrl(tls=False, host="127.0.0.1", port=broker.port,
                  username=SERVICE_USER, password=SERVICE_PASSWORD)  # fmt: skip
    link = DeviceLink(
        runtime, lambda link: MosquittoBroker(link.reports, url, ca_file=None, shards=shards)
    )
    await link.start()
    try:
        yield link
    finally:
        await link.stop()


async def test_a_kept_session_whose_n_changes_leaves_the_other_form_and_no_retained_copy_is_stored(
    broker, sqlite_url
):
    """Shard 0's session outlives its link: started with N = 1, then 2, then 1 again, it
    subscribes to the current form and leaves the other each time, or it would get a
    message both as a member of the group and outside it. Another member of the group
    takes the rest. A device's retained reading, sent again by Mosquitto at each
    subscription, is never stored; the replay of the kept session is trusted throughout."""
    serial = SERIALS[0]
    await provision(broker, sqlite_url, serial)
    member = aiomqtt.Client("127.0.0.1", broker.port, identifier="devicecontrol-link-1",
                            username=SERVICE_USER, password=SERVICE_PASSWORD)  # fmt: skip
    async with database(sqlite_url) as runtime, device(broker, serial) as plug, member:
        await plug.publish(f"devices/{serial}/state", b'{"seq": -1}', qos=1, retain=True)
        await member.subscribe([(topic, 1) for topic in SHARED_PUBLICATIONS])
        sent, kept = 0, 0
        for shards in (1, 2, 1):
            async with shard_0_link(runtime, broker, shards):
                assert await online(sqlite_url, serial) == (sent > 0)  # the replay adopted
                await send_readings(plug, serial, range(sent, sent + 4))
                sent, kept = sent + 4, kept + (4 if shards == 1 else 2)  # 2: the member's
                await eventually(lambda: _at_least(count(sqlite_url), kept))  # noqa: B023
                await asyncio.sleep(0.2)  # a copy would be stored by now
                seqs = [seq for _, seq in await stored(sqlite_url)]
                assert len(seqs) == len(set(seqs)) == kept and min(seqs) == 0, seqs
                assert await online(sqlite_url, serial)


async def test_a_shard_stores_a_reading_under_its_device_with_the_time_it_came_off_the_socket(
    sqlite_url,
):
    """The time a message reached the link's client, not the later one it was handled at:
    a link busy for a moment must not reorder one device's readings against another link."""
    url = MqttUrl(tls=False, host="127.0.0.1", port=1, username="devicecontrol", password="x")
    async with database(sqlite_url) as runtime:
        await make_controller(runtime, SERIALS[0])
        link = DeviceLink(
            runtime, lambda link: MosquittoShare(link.reports, url, shard=(1, 2), ca_file=None)
        )
        share = link.broker
        assert isinstance(share, MosquittoShare)
        came = datetime(2026, 3, 1, 12, 0, 0, 250_000)
        reader = asyncio.create_task(share._read())
        writer = asyncio.create_task(link.ingest.run())
        try:
            share._inbox.put_nowait(Message(f"devices/{SERIALS[0]}/state", b'{"seq": 0}',
                                            arrived_at=came))  # fmt: skip
            await asyncio.wait_for(share._inbox.join(), 10)
            await asyncio.wait_for(link.ingest.drained(), 10)
        finally:
            reader.cancel()
            writer.cancel()
        async with runtime.database.read() as connection:
            [row] = await connection.execute(select(readings.c.created_at))
        assert row.created_at == came and not link.connections  # nobody's connection
