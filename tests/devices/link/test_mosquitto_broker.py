"""The device link against an external broker (contract §9, ``DEVICECONTROL_MQTT_URL``): a
private Mosquitto 2 with dynamic security set up as docs/OPERATIONS.md says, a real
``devicecontrol serve`` as its client, the operators' commands keeping the devices'
accounts in step, and devices played with aiomqtt over real sockets."""

from __future__ import annotations

import asyncio
import os
import signal
import ssl
import traceback
from collections.abc import Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import aiomqtt
import msgspec
import pytest
from sqlalchemy import select, update

from devicecontrol.config import MqttUrl, Settings
from devicecontrol.database.tables import controllers, readings
from devicecontrol.devices.commands import service as commands
from devicecontrol.devices.link.compose import build_link
from devicecontrol.devices.link.core import DeviceLink
from devicecontrol.devices.link.mosquitto import log as mosquitto_log
from devicecontrol.devices.link.mosquitto.client import MosquittoBroker
from devicecontrol.devices.link.mosquitto.log import NOTICE as N
from devicecontrol.devices.link.mqtt_session.client import Message, SessionBegan
from devicecontrol.runtime import Runtime
from tests.cli.support import run_cli_beside_the_loop
from tests.devices.link.support import (
    RawDevice,
    eventually,
    forget_dropped_connection,
    new_command,
    nothing_arrives,
    served_command_status,
    served_token,
    switch_command,
    writes_locked,
)
from tests.devices.link.test_serve import link_processes
from tests.factories import (
    make_client,
    make_controller,
    make_user,
)
from tests.mosquitto import SERVICE_PASSWORD, SERVICE_USER, DynsecMosquitto, dynsec_mosquitto
from tests.one_shot import ONE_SHOT
from tests.processes import Server, free_port, run_cli, running_server
from tests.tcp_proxy import tcp_proxy
from tests.tls import private_ca, server_certificate

SERIAL, OTHER = "PLUG-X1", "PLUG-X2"
SECRET = "device-secret-0123456789abcdef"
OWNER = "ana@example.com"
NOT_AUTHORIZED = "Not authorized"  # paho's name for CONNACK return code 5
# The broker-restart test fails now and then in full runs with both cores busy, and has
# never failed alone (about 25 runs, loaded or not): it gets one rerun, which the run's
# summary shows (R), and its failures carry serve's and the broker's logs. Its cause is
# not yet found.
FLAKY_IN_FULL_RUNS = pytest.mark.flaky(reruns=1)
RECONNECT_S = 15  # the link's first retry is 1 s away; then the replay, on a busy machine
OFFLINE_WITHIN_S = 2.5  # the contract's 2 s, and the 20 ms of polling (test_mosquitto_shards)
LINK_KEEPALIVE_S = 1
# a silent connection is given up within two keep-alives (paho's PINGREQ, then no PINGRESP);
# then the first retry, the probe of the broker's log, and a margin for a busy machine
LINK_BACK_WITHIN_S = 2 * LINK_KEEPALIVE_S + 1 + 4


@asynccontextmanager
async def database(database_url: str):
    runtime = Runtime.from_settings(Settings(database_url=database_url))
    try:
        yield runtime
    finally:
        await runtime.close()


def cli(broker: DynsecMosquitto, database_url: str, *args: str, url: str | None = None):
    """The command in this process (what it tells the broker is the subject, not its start)."""
    return run_cli_beside_the_loop(
        *args, database_url=database_url, env={"DEVICECONTROL_MQTT_URL": url or broker.url}
    )


async def provision(broker: DynsecMosquitto, database_url: str, *serials: str) -> None:
    """An app and its user, and the serials registered by ``controllers add`` (one) or
    ``import`` (more), owned by the user, with SECRET: the command gives the broker the
    devices' accounts."""
    async with database(database_url) as runtime:
        await make_client(runtime)
        await make_user(runtime, OWNER)
    if len(serials) == 1:
        result = cli(broker, database_url, "controllers", "add", serials[0], "--mac",
                     "AABBCCDDEE00", "--type", "smart_plug", "--owner", OWNER,
                     "--device-secret", SECRET)  # fmt: skip
        assert result.returncode == 0, result.stderr
    elif serials:
        rows = [f"{serial},AABBCCDDEE{n:02X},smart_plug,{OWNER},{SECRET}"
                for n, serial in enumerate(serials)]  # fmt: skip
        csv_file = broker.workdir / "fleet.csv"
        csv_file.write_text("serial_number,mac,type,owner,device_secret\n" + "\n".join(rows))
        result = cli(broker, database_url, "controllers", "import", str(csv_file))
        assert result.returncode == 0, result.stderr


@contextmanager
def serving(broker: DynsecMosquitto, database_url: str, workdir: Path) -> Iterator[Server]:
    workdir.mkdir(parents=True, exist_ok=True)
    env = {"DEVICECONTROL_MQTT_URL": broker.url}
    with running_server(database_url, workdir, env=env, device_link=True) as server:
        yield server


def device(broker: DynsecMosquitto, serial: str = SERIAL, secret: str = SECRET, **options: Any):
    options.setdefault("identifier", serial)
    options.setdefault("timeout", 5)
    return aiomqtt.Client("127.0.0.1", broker.port, username=serial, password=secret, **options)


def fetch(server: Server, bearer: str, serial: str = SERIAL) -> dict[str, Any]:
    """POST /v1/provider/fetch: the latest reading and ``online``."""
    response = ONE_SHOT.post(
        f"{server.base_url}/v1/provider/fetch",
        json={"serial_number": serial},
        headers={"Authorization": f"Bearer {bearer}"},
        timeout=10,
    )
    assert response.status_code == 200, response.text
    return response.json()["provider"]


async def online(database_url: str, serial: str = SERIAL) -> bool:
    async with database(database_url) as runtime, runtime.database.read() as connection:
        query = select(controllers.c.online).where(controllers.c.serial_number == serial)
        return bool((await connection.execute(query)).scalar_one())


async def offline(database_url: str, serial: str = SERIAL) -> bool:
    return not await online(database_url, serial)


async def next_command(client: aiomqtt.Client, *, within: float = 5) -> dict[str, Any]:
    async with asyncio.timeout(within):
        async for message in client.messages:
            return msgspec.json.decode(message.payload)
    raise AssertionError("the connection ended")


async def refused(client: aiomqtt.Client) -> str:
    with pytest.raises(aiomqtt.MqttCodeError) as refusal:
        async with client:
            pass
    return str(refusal.value.rc)


def logs_of(broker: DynsecMosquitto, *servers: Server) -> str:
    """What each ``serve`` and the broker logged, for a failure's message."""
    served = "".join(f"serve's log:\n{server.stderr()}\n" for server in servers)
    return f"{served}the broker's log:\n" + (broker.workdir / "mosquitto.log").read_text(
        errors="replace"
    )


async def eventually_or_log(broker: DynsecMosquitto, server: Server, check: Any) -> None:
    """``eventually`` within RECONNECT_S; its failure carries serve's and the broker's logs."""
    try:
        await eventually(check, within=RECONNECT_S)
    except AssertionError as failed:
        raise AssertionError(f"{failed}; {logs_of(broker, server)}") from None


# --- identity and topics ------------------------------------------------------------------


async def test_a_provisioned_device_reports_and_its_reading_is_read_over_http(
    broker, sqlite_url, tmp_path
):
    await provision(broker, sqlite_url, SERIAL)
    with serving(broker, sqlite_url, tmp_path / "serve") as server:
        bearer = served_token(server, OWNER)
        assert fetch(server, bearer) == {"online": False}
        async with device(broker) as plug:
            await plug.subscribe(f"devices/{SERIAL}/commands", qos=1)
            await plug.publish(f"devices/{SERIAL}/state", b'{"relay_state": "on", "power": [12.5]}')
            shown = await eventually(lambda: fetch(server, bearer).get("relay_state") and fetch(
                server, bearer))  # fmt: skip
            assert shown == {"relay_state": "on", "power": [12.5], "online": True}
            made = switch_command(server, bearer, SERIAL, "off")
            assert (await next_command(plug))["id"] == made
    assert "Traceback" not in server.stderr()


async def test_a_wrong_secret_an_unknown_serial_and_a_borrowed_client_id_are_refused(
    broker, sqlite_url, tmp_path
):
    await provision(broker, sqlite_url, SERIAL)
    assert await refused(device(broker, secret="wrong-secret")) == NOT_AUTHORIZED
    assert await refused(device(broker, serial="NOT-REGISTERED")) == NOT_AUTHORIZED
    assert await refused(device(broker, identifier="someone-else")) == NOT_AUTHORIZED
    async with device(broker):
        pass  # the right secret works


# --- commands, rotation, restarts -----------------------------------------------------------


async def test_commands_made_while_offline_come_in_order_once_the_device_subscribes(
    broker, sqlite_url, tmp_path
):
    await provision(broker, sqlite_url, SERIAL)
    with serving(broker, sqlite_url, tmp_path / "serve") as server:
        bearer = served_token(server, OWNER)
        made = [switch_command(server, bearer, SERIAL, state) for state in ("on", "off", "on")]
        async with device(broker) as plug:
            await nothing_arrives(plug, within=0.3)  # nothing before it subscribes
            await plug.subscribe(f"devices/{SERIAL}/commands", qos=1)
            assert [(await next_command(plug))["id"] for _ in made] == made
            await plug.publish(
                f"devices/{SERIAL}/commands/result", f'{{"id": "{made[0]}", "status": "succeeded"}}'
            )
            await eventually(
                lambda: served_command_status(server, bearer, SERIAL, made[0]) == "succeeded"
            )


async def test_a_restart_of_serve_keeps_connected_devices_online_and_reaches_them(
    broker, sqlite_url, tmp_path
):
    await provision(broker, sqlite_url, SERIAL, OTHER)
    async with AsyncExitStack() as stack:
        with serving(broker, sqlite_url, tmp_path / "first") as server:
            plug = await stack.enter_async_context(device(broker))  # silent, subscribed
            await plug.subscribe(f"devices/{SERIAL}/commands", qos=1)
            await eventually(lambda: online(sqlite_url))
            os.kill(server.process.pid, signal.SIGTERM)
            assert server.process.wait(timeout=15) == 0, server.stderr()
        assert await online(sqlite_url)  # still connected to the broker
        # while serve is away another device connects and reports: the broker keeps it
        other = await stack.enter_async_context(device(broker, OTHER))
        await other.publish(f"devices/{OTHER}/state", b'{"relay_state": "while-away"}', qos=1)
        with serving(broker, sqlite_url, tmp_path / "second") as server:
            assert await online(sqlite_url, SERIAL)  # at once: the link had all news
            bearer = served_token(server, OWNER)
            shown = await eventually(lambda: fetch(server, bearer, OTHER).get("relay_state"))
            assert shown == "while-away" and fetch(server, bearer, OTHER)["online"] is True
            made = switch_command(server, bearer, SERIAL, "on")
            assert (await next_command(plug))["id"] == made
        assert await online(sqlite_url)


async def test_a_command_a_previous_link_left_sent_reaches_a_device_that_stayed_connected(
    broker, sqlite_url, tmp_path
):
    """A link may mark a command sent and die before its publish went out; the device,
    still connected to Mosquitto, will not subscribe again. The next link delivers it."""
    await provision(broker, sqlite_url, SERIAL)
    async with AsyncExitStack() as stack:
        with serving(broker, sqlite_url, tmp_path / "first") as server:
            plug = await stack.enter_async_context(device(broker))
            await plug.subscribe(f"devices/{SERIAL}/commands", qos=1)
            await eventually(lambda: online(sqlite_url))
            os.kill(server.process.pid, signal.SIGTERM)
            assert server.process.wait(timeout=15) == 0, server.stderr()
        async with database(sqlite_url) as runtime:  # marked sent, never published
            made = await new_command(runtime, SERIAL)
            assert await commands.mark_sent(runtime, SERIAL, made)
        with serving(broker, sqlite_url, tmp_path / "second") as second:
            try:
                delivered = await next_command(plug, within=RECONNECT_S)
            except TimeoutError:
                raise AssertionError(f"not delivered; {logs_of(broker, server, second)}") from None
            assert delivered["id"] == made.public_id


async def stored_sequence(database_url: str) -> list[int]:
    async with database(database_url) as runtime, runtime.database.read() as connection:
        rows = await connection.execute(select(readings.c.payload).order_by(readings.c.id))
        return [msgspec.json.decode(row.payload)["seq"] for row in rows]


async def two_stored(database_url: str) -> bool:
    return len(await stored_sequence(database_url)) >= 2


async def eight_or_more(database_url: str) -> bool:
    return len(await stored_sequence(database_url)) >= 8


async def test_a_message_the_link_had_not_stored_when_killed_is_delivered_to_it_again(
    broker, sqlite_url, tmp_path
):
    """The link acknowledges a message of its session only once it is stored: killed with
    SIGKILL before that, it leaves the broker holding the message, and the link that
    serve's watchdog starts gets it again. With acknowledgement on arrival, all 8 are lost."""
    await provision(broker, sqlite_url, SERIAL)
    with serving(broker, sqlite_url, tmp_path / "serve") as server:
        async with device(broker) as plug:
            await eventually(lambda: online(sqlite_url), within=RECONNECT_S)
            [link_pid] = link_processes(server)
            async with writes_locked(sqlite_url):
                for seq in range(8):
                    body = msgspec.json.encode({"seq": seq})
                    await plug.publish(f"devices/{SERIAL}/state", body, qos=1)
                await asyncio.sleep(1.0)  # the link has received them, and cannot store them
                os.kill(link_pid, signal.SIGKILL)
            await eventually(lambda: link_processes(server) not in ([], [link_pid]))
            await eventually(lambda: eight_or_more(sqlite_url), within=RECONNECT_S)
            await asyncio.sleep(0.5)  # a duplicate would be stored by now
            assert await stored_sequence(sqlite_url) == list(range(8))


@FLAKY_IN_FULL_RUNS
async def test_the_link_reconnects_after_a_broker_restart_and_devices_come_back(
    broker, sqlite_url, tmp_path
):
    await provision(broker, sqlite_url, SERIAL, OTHER)
    with serving(broker, sqlite_url, tmp_path / "serve") as server:
        bearer = served_token(server, OWNER)
        async with device(broker) as plug, device(broker, OTHER) as other:
            await plug.subscribe(f"devices/{SERIAL}/commands", qos=1)
            # it failed under load: what serve said tells why, next time
            await eventually_or_log(broker, server, lambda: online(sqlite_url, OTHER))
            broker.stop()  # every connection ends, the link's too
            broker.start()
        for dropped in (plug, other):
            forget_dropped_connection(dropped)
        async with device(broker) as plug:  # one device reconnects, the other does not
            await plug.subscribe(f"devices/{SERIAL}/commands", qos=1)
            made = switch_command(server, bearer, SERIAL, "off")
            assert (await next_command(plug, within=RECONNECT_S))["id"] == made
            assert await online(sqlite_url)
            await eventually_or_log(broker, server, lambda: offline(sqlite_url, OTHER))
    assert server.stderr().count("lost the MQTT broker") == 1


# in clean-clone runs it has waited on something for pytest's whole 240 s (twice in two
# runs on 2026-11-28; never in the working tree, alone, loaded or beside the heaviest
# modules, 50 runs): the budget (it takes 1-7 s) turns that into a failure that names the
# awaits it hung in (the run's summary shows a rerun's reason), and it gets two reruns
HANG_BUDGET_S = 30
HANGS_NOW_AND_THEN = pytest.mark.flaky(reruns=2)


@asynccontextmanager
async def hang_budget(seconds: float):
    try:
        async with asyncio.timeout(seconds):
            yield
    except TimeoutError as timeout:
        cancelled = timeout.__context__ or timeout
        frames = traceback.extract_tb(cancelled.__traceback__)[-6:]
        where = " <- ".join(f"{Path(f.filename).name}:{f.lineno} {f.line}" for f in frames[::-1])
        raise AssertionError(f"hung for {seconds} s in: {where}") from None


@HANGS_NOW_AND_THEN
@pytest.mark.parametrize("loss", ["broker closes", "network stalls"])
async def test_the_link_connects_again_when_its_connection_is_closed_or_stalls(
    broker, sqlite_url, loss
):
    """The link's own connection, through a proxy that closes it (the broker's FIN) or lets
    it go silent (no FIN: only keep-alive tells): the link connects again, and a reading a
    device sent meanwhile is stored (the broker kept it for the link's session). The
    broker's restart is the test above, through ``serve``."""
    await provision(broker, sqlite_url, SERIAL)
    async with (
        hang_budget(HANG_BUDGET_S),
        tcp_proxy(broker.port) as proxy,
        database(sqlite_url) as runtime,
    ):
        through_proxy = MqttUrl(tls=False, host="127.0.0.1", port=proxy.port,
                                username=SERVICE_USER, password=SERVICE_PASSWORD)  # fmt: skip
        link = DeviceLink(
            runtime,
            lambda link: MosquittoBroker(link.reports, through_proxy, ca_file=None,
                                         keepalive_s=LINK_KEEPALIVE_S),
        )  # fmt: skip
        await link.start()
        try:
            async with device(broker) as plug:
                state = f"devices/{SERIAL}/state"
                await plug.publish(state, msgspec.json.encode({"seq": 0}), qos=1)
                await eventually(lambda: stored_sequence(sqlite_url))
                proxy.cut() if loss == "broker closes" else proxy.stall()
                await plug.publish(state, msgspec.json.encode({"seq": 1}), qos=1)
                await eventually(lambda: two_stored(sqlite_url), within=LINK_BACK_WITHIN_S)
                assert await stored_sequence(sqlite_url) == [0, 1]
        finally:
            await link.stop()


# --- the operators' commands -----------------------------------------------------------------


async def test_provisioning_fails_in_one_line_and_writes_nothing_without_the_broker(
    broker, sqlite_url, tmp_path
):
    await provision(broker, sqlite_url, SERIAL)
    unreachable = f"mqtt://devicecontrol:service-password-x@127.0.0.1:{free_port()}"
    wrong_password = broker.url.replace("service-password", "wrong-password")
    csv_file = tmp_path / "more.csv"
    csv_file.write_text(f"serial_number,mac,type,device_secret\n{OTHER},AABBCCDDEEF0,melissa,s3\n")
    add = ["controllers", "add", OTHER, "--mac", "AABBCCDDEEFF", "--type", "smart_plug",
           "--device-secret", SECRET]  # fmt: skip
    results = [
        cli(broker, sqlite_url, *add, url=unreachable),
        cli(broker, sqlite_url, "controllers", "import", str(csv_file), url=unreachable),
        cli(broker, sqlite_url, "controllers", "rotate-secret", SERIAL, url=unreachable),
        cli(broker, sqlite_url, *add, url=wrong_password),
    ]
    for result in results:
        assert result.returncode == 1
        [line] = result.stderr.splitlines()
        assert "DEVICECONTROL_MQTT_URL" in line and "service-password" not in line, line
    assert "Not authorized" in results[-1].stderr
    listed = run_cli_beside_the_loop(
        "controllers", "list", "--format", "csv", database_url=sqlite_url
    )
    assert OTHER not in listed.stdout
    async with device(broker):
        pass  # the old secret still works: the rotation was not committed anywhere


async def test_a_broker_that_refuses_an_account_fails_the_import_and_writes_nothing(
    broker, sqlite_url, tmp_path
):
    await provision(broker, sqlite_url)
    # the service's user may no longer command the plugin: Mosquitto drops its request
    broker.ctrl("removeRoleACL", "devicecontrol-service", "publishClientSend",
                "$CONTROL/dynamic-security/v1")  # fmt: skip
    csv_file = tmp_path / "fleet.csv"
    csv_file.write_text(f"serial_number,mac,type,device_secret\n{OTHER},AABBCCDDEEF0,melissa,s3\n")
    result = cli(broker, sqlite_url, "controllers", "import", str(csv_file))
    assert result.returncode == 1
    [line] = result.stderr.splitlines()
    assert "DEVICECONTROL_MQTT_URL" in line and "was lost" in line, line
    listed = run_cli_beside_the_loop(
        "controllers", "list", "--format", "csv", database_url=sqlite_url
    )
    assert OTHER not in listed.stdout


def test_a_bad_mqtt_url_stops_commands_and_serve_in_one_line_hiding_the_password(tmp_path):
    env = {"DEVICECONTROL_MQTT_URL": "mqtt://devicecontrol:secret-pw@broker:99999"}
    for args in (["controllers", "list"], ["serve", "--port", str(free_port())]):
        result = run_cli(*args, env=env, cwd=tmp_path)
        assert result.returncode == 1
        [line] = result.stderr.splitlines()
        assert "DEVICECONTROL_MQTT_URL" in line and "port" in line, line
        assert "secret-pw" not in line


# --- what the link reads off the broker -------------------------------------------------------


async def test_mosquitto_logs_connections_and_subscriptions_as_the_link_reads_them(
    broker, sqlite_url
):
    """The Mosquitto facts external.py stands on, checked against the installed binary."""
    await provision(broker, sqlite_url, SERIAL)
    events: list[mosquitto_log.LogEvent] = []
    service = aiomqtt.Client(
        "127.0.0.1", broker.port, identifier="log-reader", username=SERVICE_USER,
        password=SERVICE_PASSWORD, timeout=5,
    )  # fmt: skip
    async with service:
        await service.subscribe([(topic, 1) for topic in mosquitto_log.TOPICS])

        async def read() -> None:
            async for message in service.messages:
                event = mosquitto_log.parse(message.topic.value, message.payload)
                if event is not None and event.client_id == SERIAL:
                    events.append(event)

        reader = asyncio.create_task(read())
        assert await refused(device(broker, secret="wrong")) == NOT_AUTHORIZED
        async with device(broker, clean_session=False) as plug:
            await plug.subscribe(f"devices/{SERIAL}/commands", qos=1)
            await plug.unsubscribe(f"devices/{SERIAL}/commands")
        first, _ = await RawDevice.connect(broker.port, SERIAL, SECRET)
        second, _ = await RawDevice.connect(broker.port, SERIAL, SECRET)  # takes over
        assert await first.closed_by_broker(within=2)
        second.kill()
        await eventually(lambda: len(events) >= 8)
        reader.cancel()
    kinds = [type(event).__name__ for event in events]
    assert kinds == ["Connected", "Subscribed", "Unsubscribed", "Ended",
                     "Connected", "TakenOver", "Connected", "Ended"]  # fmt: skip
    assert events[0] == mosquitto_log.Connected(SERIAL, SERIAL, events[0].address, False)
    assert events[1] == mosquitto_log.Subscribed(SERIAL, f"devices/{SERIAL}/commands")


async def feed(link: DeviceLink, items: list[Any]) -> None:
    """Hand the external broker's reader what its session would receive, and let it work."""
    broker = link.broker
    assert isinstance(broker, MosquittoBroker)
    reader = asyncio.create_task(broker._read())
    writer = asyncio.create_task(link.ingest.run())  # online and offline are written there
    try:
        for item in items:
            broker._inbox.put_nowait(item)
        await asyncio.wait_for(broker._inbox.join(), 10)
        await link.mailbox.drained()
        await asyncio.wait_for(link.ingest.drained(), 10)
    finally:
        reader.cancel()
        writer.cancel()


def line(topic: str, text: str) -> Message:
    return Message(topic, f"1795493416: {text}".encode())


LINK_BACK = line(N, "New client connected from 127.0.0.1:5 as devicecontrol-link "
                    "(p2, c0, k30, u'devicecontrol').")  # fmt: skip


@pytest.mark.parametrize("complete", [True, False], ids=["complete", "log-lines-expired"])
async def test_a_replay_is_adopted_only_if_it_holds_the_links_own_end(sqlite_url, complete):
    """After a long absence Mosquitto's log lines are gone (20 s): the link's own end line
    missing from the replay means nobody's state is known, and everyone is offline until
    heard from; present, the stored online devices are taken as connected."""
    url = MqttUrl(tls=False, host="127.0.0.1", port=1, username="devicecontrol", password="x")
    runtime = Runtime.from_settings(Settings(database_url=sqlite_url, mqtt_url=url))
    try:
        for serial in ("QUIET-1", "LEFT-1", "BACK-1"):
            await make_controller(runtime, serial)
        async with runtime.database.write() as connection:
            for serial in ("QUIET-1", "LEFT-1"):
                await connection.execute(
                    update(controllers)
                    .where(controllers.c.serial_number == serial)
                    .values(online=True)
                )
        link = build_link(runtime)
        own_end = [line(N, "Client devicecontrol-link disconnected.")] if complete else []
        await feed(link, [
            SessionBegan(present=True),
            *own_end,
            line(N, "Client LEFT-1 closed its connection."),
            Message("devices/BACK-1/state", b'{"relay_state": "on"}'),
            LINK_BACK,
        ])  # fmt: skip
        async with runtime.database.read() as connection:
            query = select(controllers.c.serial_number, controllers.c.online)
            states = dict((await connection.execute(query)).all())
        assert states == {"QUIET-1": complete, "LEFT-1": False, "BACK-1": True}
        assert sorted(link.connections) == (["BACK-1", "QUIET-1"] if complete else ["BACK-1"])
        assert link.connections["BACK-1"].subscribed  # taken as subscribed: at least once
    finally:
        await runtime.close()


# --- TLS between the pieces --------------------------------------------------------------


async def test_over_tls_the_cli_the_link_and_the_devices_reach_mosquitto_and_trust_only_its_ca(
    sqlite_url, tmp_path
):
    """mqtts:// with DEVICECONTROL_MQTT_CA: the operators' command and the link check the
    broker's certificate against the private CA; devices connect over TLS only."""
    certificate = server_certificate(tmp_path / "tls")
    stranger, _ = private_ca(tmp_path / "other", "stranger")
    with dynsec_mosquitto(tmp_path / "mosquitto", tls=certificate) as broker:
        env = {"DEVICECONTROL_MQTT_URL": broker.url, "DEVICECONTROL_MQTT_CA": str(certificate.ca)}
        async with database(sqlite_url) as runtime:
            await make_client(runtime)
            await make_user(runtime, OWNER)
        add = ["controllers", "add", SERIAL, "--mac", "AABBCCDDEE00", "--type", "smart_plug",
               "--owner", OWNER, "--device-secret", SECRET]  # fmt: skip
        untrusted = run_cli(
            *add, database_url=sqlite_url, env={**env, "DEVICECONTROL_MQTT_CA": str(stranger)}
        )
        assert untrusted.returncode == 1 and "certificate" in untrusted.stderr, untrusted.stderr
        assert len(untrusted.stderr.splitlines()) == 1
        added = run_cli(*add, database_url=sqlite_url, env=env)
        assert added.returncode == 0, added.stderr
        workdir = tmp_path / "serve"
        workdir.mkdir()
        with running_server(sqlite_url, workdir, env=env, device_link=True) as server:
            bearer = served_token(server, OWNER)
            trusting = ssl.create_default_context(cafile=str(certificate.ca))
            async with device(broker, tls_context=trusting) as plug:
                reading = b'{"relay_state": "on", "power": [3]}'
                await plug.publish(f"devices/{SERIAL}/state", reading)
                shown = await eventually(lambda: fetch(server, bearer).get("relay_state"))
                assert shown == "on"
            with pytest.raises(aiomqtt.MqttError):
                async with device(broker, timeout=2):  # no TLS: the listener speaks TLS only
                    pass
        assert "Traceback" not in server.stderr()
