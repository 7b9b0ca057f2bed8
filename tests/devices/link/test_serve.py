"""The device link under a real ``devicecontrol serve`` (contract §9): one broker whatever the
number of workers, commands made by any worker or before a restart delivered, device
connections closed by SIGTERM, a taken MQTT port refused in one line, metrics in /metrics
and no device secret in the log, even at debug level."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import time
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiomqtt
import httpx
import msgspec

from devicecontrol.clock import utcnow
from devicecontrol.config import Settings
from devicecontrol.devices import identity, repository
from devicecontrol.devices.link.endpoint.file_limit import device_capacity
from devicecontrol.runtime import Runtime
from tests.devices.link.support import (
    SECRET,
    connection_ends,
    eventually,
    is_offline,
    next_command,
    nothing_arrives,
    served_token,
    switch_command,
)
from tests.factories import (
    make_client,
    make_controller,
    make_user,
)
from tests.one_shot import ONE_SHOT
from tests.processes import Server, free_port, run_cli, running_server

SERIAL = "PLUG-9"
OWNER = "ana@example.com"
COMMANDS = f"devices/{SERIAL}/commands"
EXIT_WITHIN_S = 15


@asynccontextmanager
async def database(database_url: str):
    runtime = Runtime.from_settings(Settings(database_url=database_url))
    try:
        yield runtime
    finally:
        await runtime.close()


async def provision(database_url: str) -> None:
    """An app, its user, and the user's smart plug with a known device secret."""
    async with database(database_url) as runtime:
        await make_client(runtime)
        await make_user(runtime, OWNER)
        await make_controller(runtime, SERIAL, owner=OWNER)
        async with runtime.database.write() as connection:
            await repository.set_device_secret(
                connection, SERIAL, identity.device_secret_digest(SECRET), utcnow()
            )


def mqtt_environment(**extra: str) -> tuple[int, dict[str, str]]:
    port = free_port()
    return port, {"DEVICECONTROL_MQTT_LISTEN": f"127.0.0.1:{port}", **extra}


def plug(port: int) -> aiomqtt.Client:
    return aiomqtt.Client(
        "127.0.0.1", port, identifier=SERIAL, username=SERIAL, password=SECRET, timeout=5
    )


def link_processes(server: Server) -> list[int]:
    """The pids of serve's process group that run the device link."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            in_group = os.getpgid(int(entry.name)) == server.process.pid
        except (OSError, ProcessLookupError):
            continue
        if in_group and b"devicecontrol.devices.link.process" in cmdline:
            found.append(int(entry.name))
    return found


def samples(server: Server) -> dict[str, float]:
    """``name{labels}`` -> value, from GET /metrics."""
    text = ONE_SHOT.get(f"{server.base_url}/metrics", timeout=10).text
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            values[name] = float(value)
    return values


async def test_two_workers_run_one_broker_and_commands_from_any_worker_reach_the_device(
    database_url, tmp_path
):
    await provision(database_url)
    port, env = mqtt_environment()
    with running_server(
        database_url, tmp_path, "--workers", "2", env=env, device_link=True
    ) as server:
        assert len(link_processes(server)) == 1
        async with plug(port) as device:
            await device.subscribe(COMMANDS, qos=1)
            token = served_token(server, OWNER)
            made = [switch_command(server, token, SERIAL, state) for state in ("on", "off") * 3]
            received = [(await next_command(device))["id"] for _ in made]
            assert received == made
            await device.publish(f"devices/{SERIAL}/state", b'{"relay_state": "off"}')
            metrics = await eventually(lambda: _with_reading(server))
            assert metrics["devicecontrol_devices_connected"] == 1
            assert metrics['devicecontrol_command_transitions_total{status="sent"}'] == 6


def _with_reading(server: Server) -> dict[str, float] | None:
    values = samples(server)
    return values if values.get('devicecontrol_device_messages_total{kind="state"}') else None


async def test_sigterm_closes_the_device_connections_and_serve_exits_0(database_url, tmp_path):
    await provision(database_url)
    port, env = mqtt_environment()
    with running_server(database_url, tmp_path, env=env, device_link=True) as server:
        async with plug(port) as device:
            await device.subscribe(COMMANDS, qos=1)
            metrics = await eventually(
                lambda: samples(server).get("devicecontrol_devices_connected") == 1
            )
            assert metrics
            os.kill(server.process.pid, signal.SIGTERM)
            await connection_ends(device, within=5)
        assert server.process.wait(timeout=EXIT_WITHIN_S) == 0, server.stderr()
        assert link_processes(server) == []
    assert "Traceback" not in server.stderr()
    async with database(database_url) as runtime:
        assert await is_offline(runtime, SERIAL)


async def test_a_restart_of_serve_delivers_the_commands_queued_meanwhile(database_url, tmp_path):
    await provision(database_url)
    port, env = mqtt_environment()
    with running_server(database_url, tmp_path, env=env, device_link=True) as server:
        token = served_token(server, OWNER)
        made = [switch_command(server, token, SERIAL, state) for state in ("on", "off")]
    with running_server(database_url, tmp_path, env=env, device_link=True):
        async with plug(port) as device:
            await nothing_arrives(device, within=0.3)
            await device.subscribe(COMMANDS, qos=1)
            assert [(await next_command(device))["id"] for _ in made] == made


def test_a_taken_mqtt_port_stops_serve_in_one_line_before_http_listens(database_url, tmp_path):
    with socket.create_server(("127.0.0.1", 0)) as taken:
        mqtt_port = taken.getsockname()[1]
        http_port = str(free_port())
        env = {"DEVICECONTROL_MQTT_LISTEN": f"127.0.0.1:{mqtt_port}"}
        result = run_cli(
            "serve", "--port", http_port, database_url=database_url, env=env, cwd=tmp_path
        )
    assert result.returncode == 1, result.stderr
    [line] = result.stderr.splitlines()
    assert "DEVICECONTROL_MQTT_LISTEN" in line and f"127.0.0.1:{mqtt_port}" in line, line


async def test_debug_logging_never_writes_a_device_secret(database_url, tmp_path):
    await provision(database_url)
    wrong = "wrong-secret-that-must-not-be-logged"
    port, env = mqtt_environment(DEVICECONTROL_LOG_LEVEL="debug")
    with running_server(database_url, tmp_path, env=env, device_link=True) as server:
        refused = aiomqtt.Client("127.0.0.1", port, identifier=SERIAL, username=SERIAL,
                                 password=wrong, timeout=5)  # fmt: skip
        try:
            async with refused:
                raise AssertionError("a wrong secret was accepted")
        except aiomqtt.MqttError:
            pass
        async with plug(port) as device:
            await device.subscribe(COMMANDS, qos=1)
            await device.publish(f"devices/{SERIAL}/state", b'{"relay_state": "on"}')
            await eventually(lambda: _logged(server, "device_connected"))
        await eventually(lambda: _logged(server, "device_disconnected"))
    log = server.stderr()
    assert SECRET not in log and wrong not in log
    assert _events(log, "device_connect")[0]["reason"] == "wrong credentials"


def _events(log: str, event: str) -> list[dict[str, Any]]:
    lines = [msgspec.json.decode(line) for line in log.splitlines() if line.startswith("{")]
    return [line for line in lines if line.get("event") == event]


def _logged(server: Server, event: str) -> bool:
    return bool(_events(server.stderr(), event))


async def test_a_device_link_that_dies_is_started_again(sqlite_url, tmp_path):
    await provision(sqlite_url)
    port, env = mqtt_environment()
    with running_server(sqlite_url, tmp_path, env=env, device_link=True) as server:
        [first] = link_processes(server)
        os.kill(first, signal.SIGKILL)
        [second] = await eventually(lambda: _other_link(server, first), within=10)
        assert await eventually(lambda: _connects(port), within=10)
        assert "the device link ended unexpectedly" in server.stderr()
        assert link_processes(server) == [second]


async def _connects(port: int) -> bool:
    try:
        async with plug(port):
            return True
    except aiomqtt.MqttError:
        return False


def _other_link(server: Server, old: int) -> list[int] | None:
    found = link_processes(server)
    return found if found and old not in found else None


async def answer_every_command(device: aiomqtt.Client) -> None:
    """The device carries each command out at once and reports it succeeded."""
    async for message in device.messages:
        command = msgspec.json.decode(message.payload)
        result = msgspec.json.encode({"id": command["id"], "status": "succeeded"})
        await device.publish(f"devices/{SERIAL}/commands/result", result, qos=1)


async def test_commands_and_results_are_pushed_between_processes_not_swept(database_url, tmp_path):
    """With the safety sweep an hour apart, a command made by either worker reaches the
    device, and its result the waiting request, only by their announcements: each ?wait
    answers succeeded as soon as the device has answered, long before its wait runs out."""
    await provision(database_url)
    port, env = mqtt_environment(DEVICECONTROL_COMMAND_SWEEP="3600")
    with running_server(
        database_url, tmp_path, "--workers", "2", env=env, device_link=True
    ) as server:
        token = served_token(server, OWNER)
        async with plug(port) as device:
            await device.subscribe(COMMANDS, qos=1)
            answering = asyncio.create_task(answer_every_command(device))
            try:
                for state in ("on", "off", "on", "off"):
                    began = time.monotonic()
                    response = await asyncio.to_thread(
                        httpx.post,
                        f"{server.base_url}/v1/controllers/{SERIAL}/commands?wait=20",
                        json={"name": "switch_on_off", "params": {"state": state}},
                        headers={"Authorization": f"Bearer {token}"},
                        timeout=30,
                    )
                    assert response.status_code == 201, response.text
                    assert response.json()["command"]["status"] == "succeeded"
                    assert time.monotonic() - began < 10  # woken, not run out
            finally:
                answering.cancel()


# MQTT 3.1.1 CONNECT of client id "PLUG-9", clean session, keep-alive 60 s
CONNECT_PACKET = bytes([0x10, 18, 0, 4, *b"MQTT", 4, 2, 0, 60, 0, 6, *SERIAL.encode()])
# the serve's limit on open files: the link then holds OPEN_FILES - RESERVED_FILES devices
OPEN_FILES = 200


async def test_a_device_past_the_open_files_limit_is_refused_and_the_next_one_let_in(
    sqlite_url, tmp_path
):
    """At its limit the link closes a new device's socket at once, counts it and logs the
    episode once; HTTP answers meanwhile, and once a socket closes a device gets in."""
    await provision(sqlite_url)
    port, env = mqtt_environment()
    capacity = device_capacity(OPEN_FILES)
    held: list[socket.socket] = []
    with running_server(
        sqlite_url, tmp_path, env=env, device_link=True, open_files=OPEN_FILES
    ) as server:
        bearer = served_token(server, OWNER)
        try:
            assert samples(server)["devicecontrol_device_sockets_capacity"] == capacity
            held += [socket.create_connection(("127.0.0.1", port)) for _ in range(capacity)]
            await eventually(
                lambda: samples(server)["devicecontrol_device_sockets_open"] == capacity
            )
            for _ in range(3):
                assert await asyncio.to_thread(_closed_at_once, port)
            authorization = {"Authorization": f"Bearer {bearer}"}
            read = ONE_SHOT.get(
                f"{server.base_url}/v1/controllers/{SERIAL}", headers=authorization, timeout=10
            )
            assert read.status_code == 200, read.text
            held.pop().close()
            assert await eventually(lambda: _connects(port))
        finally:
            for sock in held:
                sock.close()
        refused = samples(server)[
            'devicecontrol_device_connections_closed_total{reason="file_limit"}'
        ]
    assert refused >= 3
    assert len(_events(server.stderr(), "device_connections_at_file_limit")) == 1
    [ended] = _events(server.stderr(), "device_connections_below_file_limit")
    assert ended["refused"] == refused


def _closed_at_once(port: int) -> bool:
    """A device's connection, and its CONNECT: the link ends it without a byte (a reset)."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        try:
            sock.sendall(CONNECT_PACKET)
            return sock.recv(16) == b""
        except ConnectionError:
            return True
