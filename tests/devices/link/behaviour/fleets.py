"""A fleet for the device link's behaviour suite: a broker, the service's link processes on
one database, and devices played by real MQTT clients over the broker's socket.

Every variant is set up as docs/OPERATIONS.md says: the embedded endpoint (one ``serve``);
a private Mosquitto with dynamic security, one link or two shards; a private RabbitMQ node
(one per test worker, emptied between tests) asking a broker hook that runs in a ``serve``
of its own, with its management API, one link or two shards. A link process is killed with
SIGKILL, as a crash is, and started again on the same broker and database.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiomqtt
import msgspec
from sqlalchemy import func, select

from devicecontrol.config import Settings
from devicecontrol.database.tables import controllers, readings
from devicecontrol.runtime import Runtime
from tests.cli.support import run_cli_beside_the_loop
from tests.devices.link.support import served_token
from tests.factories import make_client, make_user
from tests.mosquitto import DynsecMosquitto
from tests.one_shot import ONE_SHOT
from tests.processes import Server, free_port, running_server
from tests.rabbitmq import RabbitNode

SECRET = "behaviour-device-secret-0123456789"
OWNER = "ana@example.com"
HOOK_TOKEN = "hook-token-of-the-behaviour-suite-0123456789"
LINK_USER, LINK_PASSWORD = "devicecontrol-link", "link-password-of-the-behaviour-suite"
DEVICE_TIMEOUT_S = 10
# a device's rate in this suite: small, so that a burst and a backlog take few messages
RATE_PER_S = 5
# every queue of the node's one virtual host, deleted between two tests (the link's shard
# and events queues, the devices' kept subscriptions): each test starts from an empty node
EMPTY_THE_NODE = (
    '[rabbit_amqqueue:delete(Q, false, false, <<"tests">>)'
    ' || Q <- rabbit_amqqueue:list(<<"/">>)], ok.'
)


@dataclass(frozen=True)
class RabbitWorld:
    """A RabbitMQ node of this test worker's, and the port its hook is asked on."""

    node: RabbitNode
    hook_port: int


@dataclass
class Fleet:
    """One variant's broker and link processes (``shards`` of them) on ``database_url``."""

    kind: str  # "embedded", "mosquitto" or "rabbitmq"
    shards: int
    database_url: str
    workdir: Path
    mosquitto: DynsecMosquitto | None = None
    rabbit: RabbitWorld | None = None
    links: list[Server | None] = field(default_factory=list)
    hook: Server | None = None
    _stack: ExitStack = field(default_factory=ExitStack)
    _embedded_port: int = field(default_factory=free_port)
    rate_per_s: int = RATE_PER_S  # DEVICECONTROL_DEVICE_MESSAGE_RATE, a second's

    @property
    def mqtt_port(self) -> int:
        """Where devices connect."""
        if self.mosquitto is not None:
            return self.mosquitto.port
        if self.rabbit is not None:
            return self.rabbit.node.mqtt_port
        return self._embedded_port

    @property
    def api(self) -> Server:
        """A ``serve`` answering HTTP (the hook's, or a running link's)."""
        if self.hook is not None:
            return self.hook
        return next(server for server in self.links if server is not None)

    def token(self) -> str:
        return served_token(self.api, OWNER)

    def _link_env(self, shard: int) -> dict[str, str]:
        env = {
            "DEVICECONTROL_LINK_SHARD": f"{shard}/{self.shards}",
            "DEVICECONTROL_DEVICE_MESSAGE_RATE": f"{self.rate_per_s}/1",
        }
        if self.mosquitto is not None:
            env["DEVICECONTROL_MQTT_URL"] = self.mosquitto.url
        elif self.rabbit is not None:
            env["DEVICECONTROL_AMQP_URL"] = self._amqp_url()
            if shard == 0:  # it ends a rotated secret's connection through the API
                env["DEVICECONTROL_RABBITMQ_MANAGEMENT_URL"] = self._management_url()
        else:
            env["DEVICECONTROL_MQTT_LISTEN"] = f"127.0.0.1:{self._embedded_port}"
        return env

    def _amqp_url(self) -> str:
        assert self.rabbit is not None
        return f"amqp://{LINK_USER}:{LINK_PASSWORD}@127.0.0.1:{self.rabbit.node.amqp_port}/"

    def _management_url(self) -> str:
        assert self.rabbit is not None
        return f"http://127.0.0.1:{self.rabbit.node.management_port}"

    def start_hook(self) -> None:
        """RabbitMQ's: the hook in a ``serve`` of its own, so that a link may die alone."""
        assert self.rabbit is not None
        env = {
            "DEVICECONTROL_BROKER_HOOK_LISTEN": f"127.0.0.1:{self.rabbit.hook_port}",
            "DEVICECONTROL_BROKER_HOOK_TOKEN": HOOK_TOKEN,
            "DEVICECONTROL_AMQP_URL": self._amqp_url(),
            # the link's account is then tagged administrator, to end connections
            "DEVICECONTROL_RABBITMQ_MANAGEMENT_URL": self._management_url(),
        }
        workdir = self.workdir / "hook"
        workdir.mkdir()
        self.hook = self._stack.enter_context(running_server(self.database_url, workdir, env=env))

    def start(self, shard: int) -> Server:
        """Link process ``shard`` (a ``serve`` with its device link), answering."""
        workdir = self.workdir / f"link-{shard}-{uuid.uuid4().hex[:8]}"
        workdir.mkdir()
        server = self._stack.enter_context(
            running_server(self.database_url, workdir, env=self._link_env(shard), device_link=True)
        )
        self.links[shard] = server
        return server

    def kill(self, shard: int) -> None:
        """SIGKILL link process ``shard`` and what it forked (its link is a child)."""
        server = self.links[shard]
        assert server is not None
        os.killpg(server.process.pid, signal.SIGKILL)
        server.process.wait(timeout=10)
        self.links[shard] = None

    def provision(self, *serials: str) -> None:
        """The serials registered and owned by OWNER with SECRET, by ``controllers import``
        (which gives Mosquitto the devices' accounts)."""
        rows = [
            f"{serial},AABBCCDD{n // 256:02X}{n % 256:02X},smart_plug,{OWNER},{SECRET}"
            for n, serial in enumerate(serials)
        ]
        csv_file = self.workdir / f"fleet-{serials[0]}.csv"
        csv_file.write_text("serial_number,mac,type,owner,device_secret\n" + "\n".join(rows))
        env = {"DEVICECONTROL_MQTT_URL": self.mosquitto.url} if self.mosquitto else None
        result = run_cli_beside_the_loop(
            "controllers", "import", str(csv_file), database_url=self.database_url, env=env
        )
        assert result.returncode == 0, result.stderr

    def device(self, serial: str, *, secret: str = SECRET, **options: Any) -> aiomqtt.Client:
        """A device's MQTT client on the broker (clean session unless told)."""
        options.setdefault("identifier", serial)
        return aiomqtt.Client(
            "127.0.0.1",
            self.mqtt_port,
            username=serial,
            password=secret,
            protocol=aiomqtt.ProtocolVersion.V311,
            timeout=DEVICE_TIMEOUT_S,
            **options,
        )

    def managed(self, serial: str) -> bool:
        """Whether RabbitMQ's management API lists a connection of ``serial``'s (it knows
        one from the node's next statistics): only then can the link end it."""
        assert self.rabbit is not None
        answer = ONE_SHOT.get(
            f"{self._management_url()}/api/connections",
            auth=(LINK_USER, LINK_PASSWORD),
            timeout=DEVICE_TIMEOUT_S,
        )
        return answer.status_code == 200 and any(
            connection.get("user") == serial for connection in answer.json()
        )

    def logs(self) -> str:
        """What every process said, for a failure's message."""
        parts = []
        for server in [*self.links, self.hook]:
            if server is not None:
                parts.append(server.stderr()[-3000:])
        return "\n---\n".join(parts)

    def close(self) -> None:
        """Every process killed, not stopped: a graceful stop of each costs seconds, and
        the broker and database go with the fleet."""
        for shard, server in enumerate(self.links):
            if server is not None:
                self.kill(shard)
        if self.hook is not None:
            os.killpg(self.hook.process.pid, signal.SIGKILL)
            self.hook.process.wait(timeout=10)
        self._stack.close()


async def _app_and_owner(database_url: str) -> None:
    runtime = Runtime.from_settings(Settings(database_url=database_url))
    try:
        await make_client(runtime)
        await make_user(runtime, OWNER)
    finally:
        await runtime.close()


def empty_rabbit_node(node: RabbitNode) -> None:
    """Delete every queue of the node (``EMPTY_THE_NODE``)."""
    done = subprocess.run(
        ["rabbitmqctl", "-n", node.name, "eval", EMPTY_THE_NODE],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


@contextmanager
def fleet_of(
    kind: str,
    shards: int,
    *,
    database_url: str,
    workdir: Path,
    mosquitto: DynsecMosquitto | None = None,
    rabbit: RabbitWorld | None = None,
    rate_per_s: int = RATE_PER_S,
) -> Iterator[Fleet]:
    """The fleet with OWNER and the factories' app, its link processes started (shard 0
    first); every process stopped at the end."""
    fleet = Fleet(
        kind, shards, database_url, workdir, mosquitto=mosquitto, rabbit=rabbit,
        links=[None] * shards, rate_per_s=rate_per_s,
    )  # fmt: skip
    try:
        if rabbit is not None:
            empty_rabbit_node(rabbit.node)
            fleet.start_hook()
        asyncio.run(_app_and_owner(database_url))
        with ThreadPoolExecutor(max_workers=shards) as pool:  # side by side: seconds each
            list(pool.map(fleet.start, range(shards)))
        yield fleet
    finally:
        fleet.close()


# --- what a test sees of the fleet ----------------------------------------------------


async def stored(fleet: Fleet, serial: str) -> list[dict[str, Any]]:
    """A device's stored readings, in arrival order."""
    runtime = Runtime.from_settings(Settings(database_url=fleet.database_url))
    try:
        async with runtime.database.read() as connection:
            query = (
                select(readings.c.payload)
                .join(controllers, controllers.c.id == readings.c.controller_id)
                .where(controllers.c.serial_number == serial)
                .order_by(readings.c.created_at, readings.c.id)
            )
            return [msgspec.json.decode(row.payload) for row in await connection.execute(query)]
    finally:
        await runtime.close()


async def stored_count(fleet: Fleet, serial: str) -> int:
    runtime = Runtime.from_settings(Settings(database_url=fleet.database_url))
    try:
        async with runtime.database.read() as connection:
            query = (
                select(func.count())
                .select_from(readings.join(controllers))
                .where(controllers.c.serial_number == serial)
            )
            return int((await connection.execute(query)).scalar_one())
    finally:
        await runtime.close()


def online(fleet: Fleet, token: str, serial: str) -> bool:
    answer = ONE_SHOT.get(
        f"{fleet.api.base_url}/v1/controllers/{serial}",
        headers={"Authorization": f"Bearer {token}"},
        timeout=10,
    )
    assert answer.status_code == 200, answer.text
    return bool(answer.json()["controller"]["online"])


def state(serial: str) -> str:
    return f"devices/{serial}/state"


def commands(serial: str) -> str:
    return f"devices/{serial}/commands"


async def send(device: aiomqtt.Client, serial: str, seq: int, **fields: Any) -> None:
    """A reading at QoS 1: returns once the broker acknowledged it."""
    await device.publish(state(serial), msgspec.json.encode({"seq": seq, **fields}), qos=1)


async def all_stored(fleet: Fleet, serial: str, count: int) -> bool:
    return await stored_count(fleet, serial) >= count
