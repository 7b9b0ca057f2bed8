"""The behaviour suite's fleets: every test runs on each adapter it is about.

``fleet`` is one variant's broker and link processes, shared by a module's tests (each
test uses serials of its own; starting a fleet costs seconds): the embedded endpoint,
Mosquitto and RabbitMQ, each with one link process and with two shards. A module about
what brokers keep while a link is away parametrizes it with ``KEPT`` only (the embedded
endpoint is the link: while it is down no device is connected, nothing is acknowledged).
One link process reads a SQLite file; two shards read PostgreSQL when the run has it (CI
does), else SQLite.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import POSTGRESQL_URL
from tests.devices.link.behaviour.fleets import HOOK_TOKEN, Fleet, RabbitWorld, fleet_of
from tests.mosquitto import dynsec_mosquitto
from tests.processes import free_port
from tests.rabbitmq import private_rabbitmq

ALL = ["embedded", "mosquitto", "mosquitto-2", "rabbitmq", "rabbitmq-2"]
KEPT = ["mosquitto", "mosquitto-2", "rabbitmq", "rabbitmq-2"]


@pytest.fixture(scope="session")
def rabbit_world() -> Iterator[RabbitWorld]:
    """One RabbitMQ node per test worker (about 10 s to start), with the management API,
    asking the hook on a port of its own; ``fleet_of`` empties it for each fleet."""
    hook_port = free_port()
    with private_rabbitmq(f"http://127.0.0.1:{hook_port}", HOOK_TOKEN, management=True) as node:
        yield RabbitWorld(node, hook_port)


@pytest.fixture(scope="module", params=ALL)
def fleet(
    request: pytest.FixtureRequest,
    database_factories: Any,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Fleet]:
    kind, _, count = str(request.param).partition("-")
    shards = int(count or 1)
    factory = database_factories["postgresql" if shards > 1 and POSTGRESQL_URL else "sqlite"]
    workdir = tmp_path_factory.mktemp(f"fleet-{request.param}")
    database_url = factory.new_url(workdir)
    common: dict[str, Any] = {"database_url": database_url, "workdir": workdir}
    try:
        if kind == "mosquitto":
            with (
                dynsec_mosquitto(workdir / "mosquitto") as mosquitto,
                fleet_of(kind, shards, mosquitto=mosquitto, **common) as made,
            ):
                yield made
        else:
            rabbit = request.getfixturevalue("rabbit_world") if kind == "rabbitmq" else None
            with fleet_of(kind, shards, rabbit=rabbit, **common) as made:
                yield made
    finally:
        factory.drop(database_url)
