"""The published clients' device methods, end to end, and Home Assistant's Melissa flow.

A real ``devicecontrol serve`` (HTTP and its embedded broker), simulated devices that are
real MQTT clients on the broker's socket, and the unmodified libraries: ``status()`` reads
what the devices reported, ``send()`` reaches them and they carry it out.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import mclimate
import melissa
import pytest

from devicecontrol.devices.simulator import (
    DeviceCredentials,
    DeviceState,
    run_device,
    stop_tasks,
)
from tests.conftest import SQLITE_ENOUGH
from tests.e2e.support import (
    LIBRARIES_APP,
    bearer_of,
    controller,
    point_the_libraries_at,
    provision,
    wait_until_reporting,
)
from tests.processes import free_port, running_server

pytestmark = SQLITE_ENOUGH

OWNER, PASSWORD = "ana@example.com", "ana-password-123"
MELISSA = DeviceCredentials("MEL-1", "mel-1-device-secret-0123", "melissa")
PLUG = DeviceCredentials("PLUG-1", "plug-1-device-secret-0123", "smart_plug")
BOBBIE = DeviceCredentials("BOB-1", "bob-1-device-secret-01234", "bobbie")
# Home Assistant's user: one melissa that reports readings and has never had a command
HA_USER, HA_PASSWORD = "ha@example.com", "ha-password-1234"
HA_MELISSA = DeviceCredentials("MEL-HA", "mel-ha-device-secret-012", "melissa")
DEVICES = (MELISSA, PLUG, BOBBIE, HA_MELISSA)
OWNERS = {HA_MELISSA.serial_number: HA_USER}  # every other device is OWNER's
DEADLINE_S = 15


def owner_of(device: DeviceCredentials) -> str:
    return OWNERS.get(device.serial_number, OWNER)


class DeviceFleet:
    """Simulated devices on an event loop in a thread of their own (the sync libraries
    block the test's thread)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.states = {device.serial_number: DeviceState() for device in DEVICES}
        self.connected: set[str] = set()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        self._thread.start()

        async def launch() -> None:
            for device in DEVICES:
                self._tasks.append(
                    asyncio.create_task(
                        run_device(device, "127.0.0.1", self.port, interval_s=0.3,
                                   state=self.states[device.serial_number],
                                   on_connected=self.connected.add)
                    )
                )  # fmt: skip

        asyncio.run_coroutine_threadsafe(launch(), self._loop).result(10)

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(stop_tasks(self._tasks), self._loop).result(60)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()


@dataclass
class Deployment:
    base_url: str
    fleet: DeviceFleet


def wait_until_reported(base_url: str) -> None:
    """Every device online with a reading, seen over HTTP as its owner's app would."""
    deadline = time.monotonic() + DEADLINE_S
    with httpx.Client(base_url=base_url, timeout=10) as http:
        for username, password in ((OWNER, PASSWORD), (HA_USER, HA_PASSWORD)):
            serials = [d.serial_number for d in DEVICES if owner_of(d) == username]
            headers = bearer_of(http, LIBRARIES_APP, username, password)
            wait_until_reporting(http, headers, serials, deadline)


@pytest.fixture(scope="module")
def deployment(
    module_database_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Deployment]:
    provision(
        module_database_url,
        client=LIBRARIES_APP,
        users={OWNER: PASSWORD, HA_USER: HA_PASSWORD},
        controllers=[
            controller(device.serial_number, f"AABBCC00000{number}", device.type,
                       owner=owner_of(device), device_secret=device.secret)
            for number, device in enumerate(DEVICES)
        ],
    )  # fmt: skip
    workdir = tmp_path_factory.mktemp("clients-devices")
    mqtt_port = free_port()
    env = {"DEVICECONTROL_MQTT_LISTEN": f"127.0.0.1:{mqtt_port}"}
    with running_server(module_database_url, workdir, env=env, device_link=True) as server:
        fleet = DeviceFleet(mqtt_port)
        fleet.start()
        try:
            wait_until_reported(server.base_url)
            yield Deployment(server.base_url, fleet)
        finally:
            fleet.stop()


@pytest.fixture(autouse=True)
def libraries_use_the_server(deployment: Deployment, monkeypatch: pytest.MonkeyPatch) -> None:
    point_the_libraries_at(deployment.base_url, monkeypatch)


def received(deployment: Deployment, device: DeviceCredentials) -> list[dict[str, Any]]:
    return deployment.fleet.states[device.serial_number].received


def wait_for_received(deployment: Deployment, device: DeviceCredentials, count: int) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while len(received(deployment, device)) < count:
        assert time.monotonic() < deadline, received(deployment, device)
        time.sleep(0.05)


def assert_climate_reading(provider: dict[str, Any]) -> None:
    assert provider["online"] is True
    assert 16 < provider["temp"] < 30 and 0 < provider["humidity"] < 100
    assert provider["raw_temperature"] == int(provider["temp"] * 1000)


@pytest.mark.parametrize("library", [melissa.Melissa, mclimate.Mclimate], ids=lambda c: c.__name__)
def test_sync_status_reads_the_devices_readings(library: type, deployment: Deployment) -> None:
    client = library(username=OWNER, password=PASSWORD)
    status = client.status()
    assert_climate_reading(status[MELISSA.serial_number])
    assert_climate_reading(status[BOBBIE.serial_number])
    assert status[BOBBIE.serial_number]["relay_state"] in ("on", "off")
    if library is mclimate.Mclimate:  # the newer library also reads smart plugs
        plug = status[PLUG.serial_number]
        assert plug["online"] is True and plug["relay_state"] in ("on", "off")
    else:
        assert PLUG.serial_number not in status


@pytest.mark.parametrize(
    ("library", "device", "device_type", "settings"),
    [
        (melissa.Melissa, MELISSA, "melissa", {"state": 1, "mode": 3, "temp": 23, "fan": 1}),
        (melissa.Melissa, BOBBIE, "bobbie", {"state": "off"}),
        (mclimate.Mclimate, MELISSA, "melissa", {"state": 1, "mode": 2, "temp": 19, "fan": 3}),
        (mclimate.Mclimate, PLUG, "smart_plug", {"state": "off"}),
        (mclimate.Mclimate, BOBBIE, "bobbie", {"state": "on"}),
    ],
    ids=["melissa-melissa", "melissa-bobbie", "mclimate-melissa", "mclimate-plug",
         "mclimate-bobbie"],
)  # fmt: skip
def test_sync_send_reaches_the_device_which_carries_it_out(
    library: type, device: DeviceCredentials, device_type: str, settings: dict[str, Any],
    deployment: Deployment,
) -> None:  # fmt: skip
    client = library(username=OWNER, password=PASSWORD)
    before = len(received(deployment, device))
    assert client.send(device.serial_number, device_type, dict(settings)) is True
    wait_for_received(deployment, device, before + 1)
    command = received(deployment, device)[-1]
    expected = "send_ir_code" if device_type == "melissa" else "switch_on_off"
    assert (command["name"], command["params"]) == (expected, settings)


@pytest.mark.parametrize(
    "library", [melissa.AsyncMelissa, mclimate.AsyncMclimate], ids=lambda c: c.__name__
)
async def test_async_status_and_send(library: type, deployment: Deployment) -> None:
    client = library(username=OWNER, password=PASSWORD)
    connector = client.session.connector
    try:
        await client.async_connect()
        status = await client.async_status()
        assert_climate_reading(status[MELISSA.serial_number])
        before = len(received(deployment, BOBBIE))
        assert await client.async_send(BOBBIE.serial_number, "bobbie", {"state": "off"}) is True
        await asyncio.to_thread(wait_for_received, deployment, BOBBIE, before + 1)
        assert received(deployment, BOBBIE)[-1]["params"] == {"state": "off"}
    finally:
        await client.session.close()
        if connector is not None and not connector.closed:
            await connector.close()


async def test_home_assistants_melissa_climate_flow(deployment: Deployment) -> None:
    """What HA's melissa integration does: log in, find its climate devices, read their
    temperature and humidity and the AC's settings, then change one setting by sending
    the merged settings back; the device must get exactly those settings."""
    api = melissa.AsyncMelissa(username=HA_USER, password=HA_PASSWORD)
    connector = api.session.connector
    try:
        await api.async_connect()
        devices = await api.async_fetch_devices()
        climates = [sn for sn, d in devices.items() if d["type"] == "melissa"]
        assert climates == [HA_MELISSA.serial_number]
        serial = climates[0]
        data = (await api.async_status(cached=True))[serial]
        assert 16 < data[api.TEMP] < 30 and 0 < data[api.HUMIDITY] < 100
        settings = (await api.async_cur_settings(serial))["controller"]["_relation"]["command_log"]
        current = {key: settings[key] for key in (api.STATE, api.MODE, api.TEMP, api.FAN)}
        # never had a command: the documented default, the AC off (docs/DESIGN.md)
        assert current == {"state": 0, "mode": 0, "temp": 20, "fan": 0}, settings
        # the user sets 24 degrees: HA merges the change into the current settings
        new_value = dict(settings)
        new_value.update({api.TEMP: 24.0})
        assert received(deployment, HA_MELISSA) == []
        assert await api.async_send(serial, "melissa", new_value) is True
        await asyncio.to_thread(wait_for_received, deployment, HA_MELISSA, 1)
        [sent] = received(deployment, HA_MELISSA)
        assert sent["name"] == "send_ir_code"
        assert sent["params"] == {**current, "temp": 24}
        # and the next read shows the settings the AC now has
        after = (await api.async_cur_settings(serial))["controller"]["_relation"]["command_log"]
        assert {key: after[key] for key in current} == {**current, "temp": 24}
    finally:
        await api.session.close()
        if connector is not None and not connector.closed:
            await connector.close()
