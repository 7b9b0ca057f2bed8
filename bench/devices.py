"""python -m bench.devices: the device link under a fleet (issue 19's first measurements).

A real ``devicecontrol serve`` (embedded broker) on a throw-away database, provisioned by
``controllers import`` with device secrets, the operators' way. DEVICES devices connect
over raw MQTT 3.1.1 sockets (amqtt's packet classes, one asyncio task per device: a lean
generator), then publish QoS 1 readings at RATE messages a second in all for SECONDS,
while a few devices answer commands made with ``POST .../commands?wait=5``. Reported:
connect time, readings stored per second (counted in the database), PUBACK latency (which
now includes the commit), the command round trip, and the link process's memory per
connected device. Not yet: 10,000 devices, Mosquitto as the broker and as the ceiling,
and the generator's own CPU (issue 19, part 7).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiomqtt
import httpx
import msgspec
from amqtt.adapters import StreamReaderAdapter
from amqtt.mqtt.connack import ConnackPacket
from amqtt.mqtt.connect import ConnectPacket, ConnectPayload, ConnectVariableHeader
from amqtt.mqtt.publish import PublishPacket
from sqlalchemy import create_engine, func, select

from bench.databases import DEFAULT_POSTGRESQL_URL, throwaway_database
from bench.servers import free_port
from devicecontrol.tables import readings

SECRET = "bench-device-secret-0123456789"  # noqa: S105 (benchmark data only)
OWNER, PASSWORD = "bench-owner@example.com", "bench-owner-password"
CLIENT_ID, CLIENT_SECRET = "bench-app", "bench-client-secret-0123456789"
ANSWERING = 4  # devices that answer commands (owned, subscribed)
CONNECTS_AT_ONCE = 200


def serial(n: int) -> str:
    return f"BENCH-{n:06d}"


def cli(database_url: str, *args: str, stdin: str = "") -> None:
    command = [sys.executable, "-m", "devicecontrol", *args, "--database-url", database_url]
    done = subprocess.run(  # noqa: S603 (our own CLI, fixed arguments)
        command, input=stdin, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args[:2])} failed: {done.stderr.strip()}")


def provision(database_url: str, devices: int, workdir: Path) -> None:
    cli(database_url, "db", "upgrade")
    cli(database_url, "clients", "create", CLIENT_ID, "--secret", CLIENT_SECRET)
    cli(database_url, "users", "create", OWNER, "--password", PASSWORD)
    csv = workdir / "fleet.csv"
    lines = ["serial_number,mac,type,device_secret,owner"]
    for n in range(devices + ANSWERING):
        owner = OWNER if n >= devices else ""
        lines.append(f"{serial(n)},02{n:010X},smart_plug,{SECRET},{owner}")
    csv.write_text("\n".join(lines) + "\n", encoding="utf-8")
    cli(database_url, "controllers", "import", str(csv))


def stored_readings(database_url: str) -> int:
    engine = create_engine(database_url)
    try:
        with engine.connect() as connection:
            return int(connection.execute(select(func.count()).select_from(readings)).scalar())
    finally:
        engine.dispose()


def link_rss_bytes(serve: subprocess.Popen[bytes]) -> int:
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            if os.getpgid(int(entry.name)) != serve.pid:
                continue
            if b"devicecontrol.devices.link.process" not in cmdline:
                continue
            for line in (entry / "status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        except (OSError, ProcessLookupError):
            continue
    raise SystemExit("no device link process found")


class Device:
    """One device on a raw socket: CONNECT, then QoS 1 readings, PUBACK times kept."""

    def __init__(self, n: int, port: int) -> None:
        self.n, self.port = n, port
        self.sent: dict[int, float] = {}
        self.latencies: list[float] = []
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def connect(self) -> None:
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        header = ConnectVariableHeader(keep_alive=300)
        header.clean_session_flag = header.username_flag = header.password_flag = True
        sn = serial(self.n)
        payload = ConnectPayload(client_id=sn, username=sn, password=SECRET)
        self.writer.write(ConnectPacket(variable_header=header, payload=payload).to_bytes())
        connack = await ConnackPacket.from_stream(StreamReaderAdapter(self.reader))
        if connack.return_code != 0:
            raise SystemExit(f"{sn} refused: {connack.return_code}")

    async def read_acks(self) -> None:
        assert self.reader is not None
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                packet = await self.reader.readexactly(4)
                sent = self.sent.pop(int.from_bytes(packet[2:4], "big"), None)
                if sent is not None:
                    self.latencies.append(time.perf_counter() - sent)

    def publish(self, seq: int) -> None:
        assert self.writer is not None
        packet_id = seq % 65535 + 1
        body = b'{"relay_state": "on", "power": [%d.5]}' % seq
        topic = f"devices/{serial(self.n)}/state"
        self.writer.write(PublishPacket.build(topic, body, packet_id, False, 1, False).to_bytes())
        self.sent[packet_id] = time.perf_counter()


async def connect_all(devices: list[Device]) -> float:
    began = time.perf_counter()
    gate = asyncio.Semaphore(CONNECTS_AT_ONCE)

    async def one(device: Device) -> None:
        async with gate:
            await device.connect()

    await asyncio.gather(*(one(d) for d in devices))
    return time.perf_counter() - began


async def publish_for(devices: list[Device], rate: float, seconds: float) -> int:
    """RATE messages a second in all, spread over the devices in turn."""
    sent, began, seq = 0, time.perf_counter(), 0
    while (elapsed := time.perf_counter() - began) < seconds:
        due = int(elapsed * rate)
        while sent < due:
            devices[sent % len(devices)].publish(seq)
            sent, seq = sent + 1, seq + 1
        await asyncio.sleep(0.005)
    return sent


async def answer(client: aiomqtt.Client, sn: str) -> None:
    async for message in client.messages:
        command = msgspec.json.decode(message.payload)
        result = msgspec.json.encode({"id": command["id"], "status": "succeeded"})
        await client.publish(f"devices/{sn}/commands/result", result, qos=1)


async def command_round_trips(base_url: str, devices: int, seconds: float) -> list[float]:
    """Commands made one after another to the answering devices, each with ?wait=5."""
    async with httpx.AsyncClient(base_url=base_url, timeout=10) as http:
        form = {"client_id": CLIENT_ID, "client_secret": CLIENT_SECRET,
                "username": OWNER, "password": PASSWORD}  # fmt: skip
        token = (await http.post("/v1/auth/login", data=form)).json()["auth"]["access_token"]
        headers = {"Authorization": f"Bearer {token}"}
        times: list[float] = []
        began, n = time.perf_counter(), 0
        while time.perf_counter() - began < seconds:
            sn = serial(devices + n % ANSWERING)
            body = {"name": "switch_on_off", "params": {"state": "on" if n % 2 else "off"}}
            start = time.perf_counter()
            url = f"/v1/controllers/{sn}/commands?wait=5"
            answer_ = await http.post(url, json=body, headers=headers)
            if answer_.json()["command"]["status"] == "succeeded":
                times.append(time.perf_counter() - start)
            n += 1
        return times


def quantile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    return statistics.quantiles(values, n=100)[int(q * 100) - 1] if len(values) > 1 else values[0]


async def measure(base_url: str, mqtt_port: int, serve: subprocess.Popen[bytes], args) -> dict:
    database_url = args.database_url
    rss_before = link_rss_bytes(serve)
    devices = [Device(n, mqtt_port) for n in range(args.devices)]
    connect_s = await connect_all(devices)
    await asyncio.sleep(2)  # online written, idle
    rss_after = link_rss_bytes(serve)
    readers = [asyncio.create_task(d.read_acks()) for d in devices]
    async with contextlib.AsyncExitStack() as stack:
        answering = []
        for n in range(args.devices, args.devices + ANSWERING):
            client = aiomqtt.Client("127.0.0.1", mqtt_port, identifier=serial(n),
                                    username=serial(n), password=SECRET)  # fmt: skip
            await stack.enter_async_context(client)
            await client.subscribe(f"devices/{serial(n)}/commands", qos=1)
            answering.append(asyncio.create_task(answer(client, serial(n))))
        stored_before = stored_readings(database_url)
        flow = asyncio.create_task(publish_for(devices, args.rate, args.seconds))
        round_trips = await command_round_trips(base_url, args.devices, args.seconds)
        sent = await flow
        await asyncio.sleep(3)  # what was offered gets stored
        stored = stored_readings(database_url) - stored_before
        for task in answering + readers:
            task.cancel()
    latencies = [x for d in devices for x in d.latencies]
    return {
        "devices": args.devices,
        "connect_s": connect_s,
        "offered_per_s": sent / args.seconds,
        # stored by 3 s after the flow ended, over the flow's seconds
        "stored_per_s": stored / args.seconds,
        "acknowledged": len(latencies),
        "sent": sent,
        "stored": stored,
        "puback_p50_ms": quantile(latencies, 0.5) * 1000,
        "puback_p99_ms": quantile(latencies, 0.99) * 1000,
        "commands": len(round_trips),
        "round_trip_p50_ms": quantile(round_trips, 0.5) * 1000,
        "round_trip_p99_ms": quantile(round_trips, 0.99) * 1000,
        "bytes_per_idle_device": (rss_after - rss_before) / args.devices,
    }


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.devices", description=__doc__)
    parser.add_argument("--devices", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=1000, help="readings a second, in all")
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--backend", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--postgresql-url", default=DEFAULT_POSTGRESQL_URL)
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory(prefix="devicecontrol-bench-devices-") as workdir,
        throwaway_database(args.backend, args.devices, args.postgresql_url) as database_url,
    ):
        args.database_url = database_url
        provision(database_url, args.devices, Path(workdir))
        port, mqtt_port = free_port(), free_port()
        env = {**os.environ, "DEVICECONTROL_MQTT_LISTEN": f"127.0.0.1:{mqtt_port}",
               "DEVICECONTROL_LOG_LEVEL": "warning"}  # fmt: skip
        serve = subprocess.Popen(  # noqa: S603 (our own CLI, fixed arguments)
            [sys.executable, "-m", "devicecontrol", "serve", "--port", str(port),
             "--database-url", database_url],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
        try:
            base_url = f"http://127.0.0.1:{port}"
            for _ in range(100):
                with contextlib.suppress(httpx.TransportError):
                    httpx.get(f"{base_url}/healthz", timeout=1)
                    break
                time.sleep(0.1)
            result = asyncio.run(measure(base_url, mqtt_port, serve, args))
        finally:
            os.killpg(serve.pid, 15)
            serve.wait(timeout=30)
    for key, value in result.items():
        print(f"{key:24} {value:,.1f}" if isinstance(value, float) else f"{key:24} {value:,}")


if __name__ == "__main__":
    main()
