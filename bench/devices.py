"""python -m bench.devices: the device link under a fleet.

A real ``devicecontrol serve`` on a throw-away database, provisioned by ``controllers
import`` with device secrets, the operators' way. DEVICES devices connect over raw MQTT
3.1.1 sockets (amqtt's packet classes, one asyncio task per device: a lean generator), then
publish QoS 1
readings at RATE messages a second in all for SECONDS, while a few devices answer commands
made with ``POST .../commands?wait=5``. Then every device drops its connection and all
reconnect at once, while HTTP reads are timed (the reconnect storm against the calm).

Reported: connect time, readings stored per second (counted in the database), PUBACK
latency (it includes the commit), the command round trip, the link process's memory per
idle connected device, the CPU the service used (all of serve's processes) and the CPU
the generator used. The ceiling, in the same run: Mosquitto forwarding the same readings
from as many devices to one subscriber (``--no-ceiling`` leaves it out).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import aiomqtt
import httpx
import msgspec
from amqtt.adapters import StreamReaderAdapter
from amqtt.errors import NoDataError
from amqtt.mqtt.connect import ConnectPacket, ConnectPayload, ConnectVariableHeader
from amqtt.mqtt.packet import PUBLISH, MQTTFixedHeader
from amqtt.mqtt.puback import PubackPacket
from amqtt.mqtt.publish import PublishPacket
from amqtt.mqtt.subscribe import SubscribePacket
from sqlalchemy import func, select

from bench.brokers import mosquitto_broker
from bench.databases import DEFAULT_POSTGRESQL_URL, throwaway_database
from bench.fleet_mosquitto import fleet_mosquitto
from bench.profiler import py_spy_path
from bench.servers import free_port
from devicecontrol.database.engine import Database
from devicecontrol.database.tables import readings

SECRET = "bench-device-secret-0123456789"  # noqa: S105 (benchmark data only)
OWNER, PASSWORD = "bench-owner@example.com", "bench-owner-password"
CLIENT_ID, CLIENT_SECRET = "bench-app", "bench-client-secret-0123456789"
ANSWERING = 8  # devices that answer commands (owned, subscribed): under 20 results/s each, the
# default message rate limit, with commands round-tripping in 10 ms
CONNECTS_AT_ONCE = 200
STORM_AT_ONCE = 2000  # sockets opening at once in the reconnect storm
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


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


async def stored_readings(database_url: str) -> int:
    """Readings in the database, read through the service's own ``Database``."""
    database = Database(database_url)
    try:
        async with database.read() as connection:
            result = await connection.execute(select(func.count()).select_from(readings))
            return int(result.scalar_one())
    finally:
        await database.dispose()


def service_cpu_s(serve: subprocess.Popen[bytes]) -> float:
    """CPU seconds used so far by every process of serve's group (HTTP workers, link)."""
    used = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.getpgid(int(entry.name)) != serve.pid:
                continue
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            used += int(fields[11]) + int(fields[12])  # utime, stime
        except (OSError, ProcessLookupError, IndexError, ValueError):
            continue
    return used / CLOCK_TICKS


def link_rss_bytes(serve: subprocess.Popen[bytes]) -> int:
    for line in (Path("/proc") / str(link_pid(serve)) / "status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise SystemExit("the device link process has no VmRSS")


def link_pid(serve: subprocess.Popen[bytes]) -> int:
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            if os.getpgid(int(entry.name)) != serve.pid:
                continue
            if b"devicecontrol.devices.link.process" not in cmdline:
                continue
            return int(entry.name)
        except (OSError, ProcessLookupError):
            continue
    raise SystemExit("no device link process found")


class Device:
    """One device on a raw socket: CONNECT, then QoS 1 readings, PUBACK times kept."""

    def __init__(
        self, n: int, port: int, serial_number: str | None = None, *, source: str | None = None
    ) -> None:
        self.n, self.port = n, port
        self.source = source  # the local address to connect from (each has its own ports)
        self.sn = serial_number or serial(n)
        self.sent: dict[int, float] = {}
        self.latencies: list[float] = []
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.connect_packet: bytes | None = None

    def drop(self) -> None:
        if self.writer is not None:
            self.writer.transport.abort()

    async def connect(self) -> None:
        """CONNECT, built once per device, and its CONNACK read as the 4 bytes it is: the
        generator's cost per connect is the socket (it shares the 2 cores with the service,
        and a reconnect storm opens 2,000 sockets at once)."""
        local = (self.source, 0) if self.source else None
        self.reader, self.writer = await asyncio.open_connection(
            "127.0.0.1", self.port, local_addr=local
        )
        if self.connect_packet is None:
            header = ConnectVariableHeader(keep_alive=300)
            header.clean_session_flag = header.username_flag = header.password_flag = True
            sn = self.sn
            payload = ConnectPayload(client_id=sn, username=sn, password=SECRET)
            packet = ConnectPacket(variable_header=header, payload=payload)
            self.connect_packet = packet.to_bytes()
        self.writer.write(self.connect_packet)
        connack = await self.reader.readexactly(4)  # 0x20, 2, flags, return code
        if connack[0] != 0x20 or connack[3] != 0:
            raise SystemExit(f"{self.sn} refused: {connack[3]}")

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
        topic = f"devices/{self.sn}/state"
        self.writer.write(PublishPacket.build(topic, body, packet_id, False, 1, False).to_bytes())
        self.sent[packet_id] = time.perf_counter()


class AnsweringDevice(Device):
    """A device that subscribes to its commands and answers each at once, on a raw socket
    with TCP_NODELAY (asyncio's default): paho's Nagle would add the service's delayed ACK
    (about 40 ms) to every result that follows a PUBACK, and that is not the service."""

    async def answer(self) -> None:
        assert self.reader is not None and self.writer is not None
        topic = f"devices/{self.sn}/commands"
        self.writer.write(SubscribePacket.build([(topic, 1)], packet_id=1).to_bytes())
        stream = StreamReaderAdapter(self.reader)
        seq = 0
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError, NoDataError):
            while True:
                header = await MQTTFixedHeader.from_stream(stream)
                if header is None:
                    return
                if header.packet_type != PUBLISH:
                    await self.reader.readexactly(header.remaining_length)
                    continue
                message = await PublishPacket.from_stream(stream, fixed_header=header)
                command = msgspec.json.decode(bytes(message.data))
                ARRIVED[command["id"]] = time.perf_counter()
                self.writer.write(PubackPacket.build(message.packet_id).to_bytes())
                result = msgspec.json.encode({"id": command["id"], "status": "succeeded"})
                seq = seq % 65535 + 1
                self.writer.write(
                    PublishPacket.build(f"{topic}/result", result, seq, False, 1, False).to_bytes()
                )


async def connect_all(devices: list[Device], at_once: int = CONNECTS_AT_ONCE) -> float:
    began = time.perf_counter()
    gate = asyncio.Semaphore(at_once)

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


ARRIVED: dict[str, float] = {}  # command id -> when its device got it
DELIVERIES: list[float] = []  # POST to the device having it, per command that succeeded


async def command_round_trips(
    base_url: str, headers: dict[str, str], devices: int, seconds: float
) -> tuple[list[float], int]:
    """Commands made one after another to the answering devices, each with ?wait=5: the
    round trips of those that succeeded, and how many did not (in 5 s, or at all)."""
    async with httpx.AsyncClient(base_url=base_url, timeout=10) as http:
        times: list[float] = []
        DELIVERIES.clear()
        failed = 0
        began, n = time.perf_counter(), 0
        while time.perf_counter() - began < seconds:
            sn = serial(devices + n % ANSWERING)
            body = {"name": "switch_on_off", "params": {"state": "on" if n % 2 else "off"}}
            start = time.perf_counter()
            url = f"/v1/controllers/{sn}/commands?wait=5"
            n += 1
            try:
                answer_ = await http.post(url, json=body, headers=headers)
            except httpx.TimeoutException:
                failed += 1
                continue
            if answer_.json()["command"]["status"] == "succeeded":
                times.append(time.perf_counter() - start)
                arrived = ARRIVED.pop(answer_.json()["command"]["id"], None)
                if arrived is not None:
                    DELIVERIES.append(arrived - start)
            else:
                failed += 1
        return times, failed


async def dropped_messages(base_url: str) -> dict[str, float]:
    """The service's count of device messages it did not take, by reason (/metrics)."""
    async with httpx.AsyncClient(base_url=base_url, timeout=10) as http:
        text = (await http.get("/metrics")).text
    dropped: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("devicecontrol_device_messages_dropped_total{"):
            labels, value = line.rsplit(" ", 1)
            reason = labels.split('reason="', 1)[1].split('"', 1)[0]
            dropped[reason] = dropped.get(reason, 0) + float(value)
    return dropped


async def login(http: httpx.AsyncClient) -> dict[str, str]:
    form = {"client_id": CLIENT_ID, "client_secret": CLIENT_SECRET,
            "username": OWNER, "password": PASSWORD}  # fmt: skip
    token = (await http.post("/v1/auth/login", data=form)).json()["auth"]["access_token"]
    return {"Authorization": f"Bearer {token}"}


def read_times(base_url: str, headers: dict[str, str], devices: int, stop_file: str) -> list[float]:
    """Controller reads one after another (an app's), each timed, until ``stop_file``
    exists: run in a process of its own, since the generator's event loop, busy opening
    2,000 sockets at once in the storm, would add its own delays to every read it timed
    (before this, the storm's reads on SQLite were 5-6 ms at p99 in the generator and
    nothing the service did moved them)."""
    with httpx.Client(base_url=base_url, timeout=30) as http:
        times: list[float] = []
        n = 0
        while not os.path.exists(stop_file):
            start = time.perf_counter()
            answer_ = http.get(f"/v1/controllers/{serial(devices + n % ANSWERING)}",
                               headers=headers)  # fmt: skip
            answer_.raise_for_status()
            times.append(time.perf_counter() - start)
            if n == 0:
                Path(stop_file + ".reading").touch()  # the block may begin
            n += 1
        return times


@contextlib.asynccontextmanager
async def timed_reads(
    base_url: str, headers: dict[str, str], devices: int, workdir: Path
) -> AsyncIterator[list[float]]:
    """``read_times`` in another process while the block runs; its times, after."""
    stop_file = workdir / f"stop-reads-{time.monotonic_ns()}"
    times: list[float] = []
    loop = asyncio.get_running_loop()
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        reads = loop.run_in_executor(pool, read_times, base_url, headers, devices, str(stop_file))
        try:
            yield times
        finally:
            stop_file.touch()
            times.extend(await reads)


async def reconnect_storm(
    base_url: str, headers: dict[str, str], devices: list[Device], workdir: Path
) -> dict[str, float]:
    """HTTP reads timed while calm, then while every device reconnects at once."""
    async with timed_reads(base_url, headers, len(devices), workdir) as calm_times:
        await asyncio.sleep(3)
    for device in devices:
        device.drop()
    await asyncio.sleep(1)  # the link has seen them go
    async with timed_reads(base_url, headers, len(devices), workdir) as storm_times:
        reconnect_s = await connect_all(devices, STORM_AT_ONCE)
    return {
        "storm_reconnect_s": reconnect_s,
        "http_calm_p99_ms": quantile(calm_times, 0.99) * 1000,
        "http_storm_p99_ms": quantile(storm_times, 0.99) * 1000,
        "http_storm_over_calm_p99": quantile(storm_times, 0.99) / quantile(calm_times, 0.99),
    }


def quantile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    return statistics.quantiles(values, n=100)[int(q * 100) - 1] if len(values) > 1 else values[0]


def quantile_fine(values: list[float], q: float) -> float:
    """``q`` of ``values`` to a thousandth (the nearest rank); 0 for none."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def measure(
    base_url: str,
    mqtt_port: int,
    serve: subprocess.Popen[bytes],
    args: argparse.Namespace,
) -> dict:
    database_url = args.database_url
    rss_before = link_rss_bytes(serve)
    devices = [Device(n, mqtt_port) for n in range(args.devices)]
    connect_s = await connect_all(devices)
    await asyncio.sleep(2)  # online written, idle
    rss_after = link_rss_bytes(serve)
    readers = [asyncio.create_task(d.read_acks()) for d in devices]
    answering = []
    for n in range(args.devices, args.devices + ANSWERING):
        answerer = AnsweringDevice(n, mqtt_port)
        await answerer.connect()
        answering.append(asyncio.create_task(answerer.answer()))
    await asyncio.sleep(0.5)  # subscribed
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        headers = await login(http)  # before the flow: the login's hash is no part of it
    stored_before = await stored_readings(database_url)
    profiler = None
    if args.profile:  # py-spy on the link process for the flow's seconds
        profiler = subprocess.Popen(  # noqa: S603, ASYNC220 (py-spy, in the background)
            [py_spy_path(), "record", "--pid", str(link_pid(serve)), "--rate", "100",
             "--duration", str(int(args.seconds)), "--format", "raw",
             "--output", args.profile, "--nonblocking"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
    cpu_before, own_before = service_cpu_s(serve), time.process_time()
    flow = asyncio.create_task(publish_for(devices, args.rate, args.seconds))
    round_trips, commands_failed = await command_round_trips(
        base_url, headers, args.devices, args.seconds
    )
    sent = await flow
    service_cpu = (service_cpu_s(serve) - cpu_before) / args.seconds
    if profiler is not None:
        profiler.wait(timeout=60)
    generator_cpu = (time.process_time() - own_before) / args.seconds
    await asyncio.sleep(3)  # what was offered gets stored
    stored = await stored_readings(database_url) - stored_before
    dropped = await dropped_messages(base_url)
    for task in answering + readers:
        task.cancel()
    storm = (
        await reconnect_storm(base_url, headers, devices, Path(args.workdir)) if args.storm else {}
    )
    latencies = [x for d in devices for x in d.latencies]
    return {
        "backend": args.backend,
        "broker": args.broker,
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
        "commands_failed": commands_failed,
        "device_messages_dropped": ", ".join(f"{k} {v:.0f}" for k, v in dropped.items()) or "0",
        "round_trip_p50_ms": quantile(round_trips, 0.5) * 1000,
        "round_trip_p99_ms": quantile(round_trips, 0.99) * 1000,
        # a stall that comes once in a run is past the p99 of a few thousand commands
        "round_trip_p999_ms": quantile_fine(round_trips, 0.999) * 1000,
        "round_trip_max_ms": max(round_trips, default=0.0) * 1000,
        "round_trips_over_50_ms": sum(1 for t in round_trips if t > 0.050),
        "delivery_p50_ms": quantile(DELIVERIES, 0.5) * 1000,
        "delivery_p99_ms": quantile(DELIVERIES, 0.99) * 1000,
        "bytes_per_idle_device": (rss_after - rss_before) / args.devices,
        "service_cpu_cores": service_cpu,
        "generator_cpu_cores": generator_cpu,
        **storm,
    }


async def mosquitto_ceiling(args: argparse.Namespace) -> dict[str, object]:
    """The same devices, rate and seconds against Mosquitto forwarding every reading to one
    subscriber: what a broker that only moves bytes does on this machine, in this run."""
    async with mosquitto_broker() as port:
        devices = [Device(n, port) for n in range(args.devices)]
        connect_s = await connect_all(devices)
        readers = [asyncio.create_task(d.read_acks()) for d in devices]
        received = 0
        async with aiomqtt.Client("127.0.0.1", port, identifier="bench-service") as service:
            await service.subscribe("devices/+/state", qos=1)

            async def receive() -> None:
                nonlocal received
                async for _ in service.messages:
                    received += 1

            receiver = asyncio.create_task(receive())
            own_before = time.process_time()
            sent = await publish_for(devices, args.rate, args.seconds)
            generator_cpu = (time.process_time() - own_before) / args.seconds
            await asyncio.sleep(3)
            receiver.cancel()
        for task in readers:
            task.cancel()
        for device in devices:
            device.drop()
    latencies = [x for d in devices for x in d.latencies]
    return {
        "ceiling": "mosquitto, one subscriber",
        "ceiling_connect_s": connect_s,
        "ceiling_offered_per_s": sent / args.seconds,
        "ceiling_delivered_per_s": received / args.seconds,
        "ceiling_puback_p50_ms": quantile(latencies, 0.5) * 1000,
        "ceiling_puback_p99_ms": quantile(latencies, 0.99) * 1000,
        "ceiling_generator_cpu_cores": generator_cpu,
    }


@contextlib.contextmanager
def serving(
    database_url: str, port: int, env: dict[str, str], *options: str
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``devicecontrol serve OPTIONS`` on ``port`` until the block ends; yields its base URL
    and process once ``/healthz`` answers."""
    serve = subprocess.Popen(  # noqa: S603 (our own CLI, fixed arguments)
        [sys.executable, "-m", "devicecontrol", "serve", "--port", str(port),
         "--database-url", database_url, *options],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    try:
        base_url = f"http://127.0.0.1:{port}"
        for _ in range(200):
            with contextlib.suppress(httpx.TransportError):
                httpx.get(f"{base_url}/healthz", timeout=1)
                break
            time.sleep(0.1)
        yield base_url, serve
    finally:
        os.killpg(serve.pid, 15)
        serve.wait(timeout=30)


def run_serve(
    database_url: str,
    port: int,
    mqtt_port: int,
    env: dict[str, str],
    args: argparse.Namespace,
) -> dict:
    """``devicecontrol serve`` for the measurement, stopped after it."""
    with serving(database_url, port, env) as (base_url, serve):
        return asyncio.run(measure(base_url, mqtt_port, serve, args))


def add_fleet_arguments(parser: argparse.ArgumentParser, *, devices: int) -> None:
    """The options every fleet bench takes: its size, its rate and time, its database."""
    parser.add_argument("--devices", type=int, default=devices)
    parser.add_argument("--rate", type=float, default=1000, help="readings a second, in all")
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--backend", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--postgresql-url", default=DEFAULT_POSTGRESQL_URL)


@contextlib.contextmanager
def provisioned_fleet(args: argparse.Namespace, prefix: str) -> Iterator[tuple[int, int]]:
    """A work directory and a throw-away database with ``args.devices`` devices (and the
    answering ones), named in ``args.workdir`` and ``args.database_url``; two free ports,
    for HTTP and MQTT."""
    with (
        tempfile.TemporaryDirectory(prefix=prefix) as workdir,
        throwaway_database(args.backend, args.devices, args.postgresql_url) as database_url,
    ):
        args.database_url, args.workdir = database_url, workdir
        provision(database_url, args.devices, Path(workdir))
        yield free_port(), free_port()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.devices", description=__doc__)
    add_fleet_arguments(parser, devices=1000)
    parser.add_argument("--no-storm", dest="storm", action="store_false")
    parser.add_argument("--profile", help="py-spy's collapsed stacks of the link, to this file")
    parser.add_argument("--no-ceiling", dest="ceiling", action="store_false")
    parser.add_argument(
        "--broker",
        choices=("embedded", "mosquitto", "rabbitmq"),
        default="embedded",
        help="the devices' broker: the service's own endpoint, Mosquitto "
        "(DEVICECONTROL_MQTT_URL, its accounts written before it starts), or a RabbitMQ "
        "node asking the broker hook (DEVICECONTROL_AMQP_URL: bench/rabbitmq_link.py with "
        "one and two link processes, then bench/hook.py's answers a second)",
    )
    parser.add_argument("--readings", type=int, default=50_000, help="rabbitmq: the drain")
    parser.add_argument("--connections", type=int, default=16, help="rabbitmq: the hook's wrk")
    args = parser.parse_args()
    if args.broker == "rabbitmq":
        print_result(rabbitmq_and_hook(args), width=44, decimals=2)
        return
    with provisioned_fleet(args, "devicecontrol-bench-devices-") as (port, mqtt_port):
        database_url, workdir = args.database_url, args.workdir
        with contextlib.ExitStack() as stack:
            env = {**os.environ, "DEVICECONTROL_LOG_LEVEL": "warning"}
            if args.broker == "mosquitto":
                serials = [serial(n) for n in range(args.devices + ANSWERING)]
                broker = stack.enter_context(
                    fleet_mosquitto(Path(workdir), mqtt_port, serials, SECRET)
                )
                env["DEVICECONTROL_MQTT_URL"] = broker.url
            else:
                env["DEVICECONTROL_MQTT_LISTEN"] = f"127.0.0.1:{mqtt_port}"
            result = run_serve(database_url, port, mqtt_port, env, args)
    if args.ceiling:
        result.update(asyncio.run(mosquitto_ceiling(args)))
    print_result(result)


def rabbitmq_and_hook(args: argparse.Namespace) -> dict[str, object]:
    """The link on RabbitMQ (one and two link processes) and the hook's answers a second:
    their own modules' measurements, run with this command's arguments."""
    from bench import hook, rabbitmq_link  # they build on this module

    result: dict[str, object] = dict(rabbitmq_link.measure(args))
    answers = hook.measure(argparse.Namespace(**{**vars(args), "seconds": int(args.seconds)}))
    result.update({f"hook: {name}": value for name, value in answers.items()})
    return result


def print_result(result: dict, width: int = 28, decimals: int = 1) -> None:
    """One ``name value`` line per measurement, numbers with thousands separators."""
    for key, value in result.items():
        if isinstance(value, float):
            shown = f"{value:,.{decimals}f}"
        elif isinstance(value, int):
            shown = f"{value:,}"
        else:
            shown = str(value)
        print(f"{key:{width}} {shown}")


if __name__ == "__main__":
    main()
