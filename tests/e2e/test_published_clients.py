"""The published client libraries, unmodified, against a real `devicecontrol serve` process.

py-melissa-climate (``melissa``) and py-mclimate-api (``mclimate``) are what existing
integrations run: the service is a drop-in only if they log in, list and read controllers
without a change. Their base URL is a module constant, imported by name into each wrapper
module, so every copy is pointed at the test server. They log in as the app they carry in
their code (``mclimate`` / ``mclimate_core``), which the operator registers with the CLI.

The device methods (``status``, ``send``) are exercised in test_published_clients_devices.py;
``fetch_geofences`` here, against geofences the owner made over HTTP (contract §12).

One server per backend serves the whole module: every test only reads, and the failed
logins go to an account of their own, so none can throttle another test's logins.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import mclimate
import mclimate.exceptions
import melissa
import melissa.exceptions
import pytest

from tests.conftest import SQLITE_ENOUGH
from tests.e2e.support import (
    LIBRARIES_APP,
    bearer_of,
    controller,
    ok,
    point_the_libraries_at,
    provision,
)
from tests.processes import running_server

pytestmark = SQLITE_ENOUGH

OWNER, OWNER_PASSWORD = "ana@example.com", "ana-password-123"
OTHER, OTHER_PASSWORD = "bob@example.com", "bob-password-123"


@dataclass(frozen=True)
class Device:
    serial: str
    mac: str  # as given to the CLI
    type: str
    name: str
    firmware: str
    online: bool
    owner: str | None

    def row(self) -> dict[str, str]:
        """Its row in ``controllers import``'s CSV."""
        online, owner = ("true" if self.online else "false"), self.owner or ""
        columns = {"name": self.name, "firmware_version": self.firmware, "online": online}
        return controller(self.serial, self.mac, self.type, **columns, owner=owner)


# hers, in the order they are registered (the listing's order)
HERS = [
    Device("MEL-100", "aa:bb:cc:00:00:01", "melissa", "Living room", "1.2.3", True, OWNER),
    Device("PLUG-200", "aa-bb-cc-00-00-02", "smart_plug", "Kettle", "2.0", False, OWNER),
    Device("BOB-300", "aabbcc000003", "bobbie", "Radiator", "0.9", True, OWNER),
]
NOT_HERS = [
    Device("MEL-900", "aa:bb:cc:00:00:09", "melissa", "Bob's", "1.0", True, OTHER),
    Device("PLUG-901", "aa:bb:cc:00:00:0a", "smart_plug", "Spare", "1.0", False, None),
]

SYNC_CLASSES = [melissa.Melissa, mclimate.Mclimate]
ASYNC_CLASSES = [melissa.AsyncMelissa, mclimate.AsyncMclimate]
API_EXCEPTIONS = {
    "melissa": melissa.exceptions.ApiException,
    "mclimate": mclimate.exceptions.ApiException,
}


@dataclass(frozen=True)
class Deployment:
    base_url: str
    client_created: subprocess.CompletedProcess[str]
    owner_id: int
    geofences: dict[str, dict[str, Any]]  # hers, by serial number, as the service shows them


# hers: a melissa's and a plug's, as an app makes them (fields as an object and as text)
GEOFENCES = [
    {"controller_id": "MEL-100", "latitude": 42.6977, "longitude": 23.3219, "radius": 150,
     "enter_command_name": "send_ir_code",
     "enter_command_fields": {"state": 1, "mode": 2, "temp": 23, "fan": 0},
     "exit_command_name": "send_ir_code",
     "exit_command_fields": '{"state": 0, "mode": 0, "temp": 20, "fan": 0}', "enter_push": 1},
    {"controller_id": "PLUG-200", "latitude": 52.37, "longitude": 4.89, "radius": 5000,
     "enter_command_name": "switch_on_off", "enter_command_fields": '{"state": "on"}',
     "exit_command_name": "switch_on_off", "exit_command_fields": {"state": "off"}},
]  # fmt: skip


def make_geofences(base_url: str) -> dict[str, dict[str, Any]]:
    """The owner's geofences, made over HTTP as her app would."""
    with httpx.Client(base_url=base_url, timeout=10) as http:
        headers = bearer_of(http, LIBRARIES_APP, OWNER, OWNER_PASSWORD)
        made = {}
        for body in GEOFENCES:
            response = http.post("/v1/geofences", json=body, headers=headers)
            assert response.status_code == 201, response.text
            made[body["controller_id"]] = response.json()["geofence"]
    return made


@pytest.fixture(scope="module")
def deployment(
    module_database_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Deployment]:
    """The libraries' app, two accounts and five controllers, provisioned through the command
    line, and one server per backend, shared by the module's tests (each start-up costs
    seconds)."""
    provisioned = provision(
        module_database_url,
        client=LIBRARIES_APP,
        users={OWNER: OWNER_PASSWORD, OTHER: OTHER_PASSWORD},
        controllers=[device.row() for device in [*HERS, *NOT_HERS]],
    )
    assert provisioned.client is not None
    workdir = tmp_path_factory.mktemp("published-clients")
    with running_server(module_database_url, workdir, device_link=True) as server:
        geofences = make_geofences(server.base_url)
        yield Deployment(server.base_url, provisioned.client, provisioned.user_id(OWNER), geofences)


@pytest.fixture(autouse=True)
def libraries_use_the_server(deployment: Deployment, monkeypatch: pytest.MonkeyPatch) -> None:
    point_the_libraries_at(deployment.base_url, monkeypatch)


def api_exception(library_class: type) -> type[Exception]:
    return API_EXCEPTIONS[library_class.__module__.split(".")[0]]


def expected_mac(device: Device) -> str:
    return re.sub(r"[^0-9a-f]", "", device.mac.lower()).upper()


def assert_logged_in(client: Any) -> None:
    assert re.fullmatch(r"[0-9a-f]{40}", client.access_token)
    assert re.fullmatch(r"[0-9a-f]{40}", client.refresh_token)
    assert client.refresh_token != client.access_token
    assert client.token_type == "Bearer"


def assert_controller(body: dict[str, Any], device: Device, owner_id: int) -> None:
    assert body["serial_number"] == device.serial
    assert body["mac"] == expected_mac(device)
    assert body["type"] == device.type
    assert body["name"] == device.name
    assert body["firmware_version"] == device.firmware
    # online is the device link's alone (contract §9): no device of these is connected
    assert body["online"] is False
    assert body["user_id"] == owner_id
    assert body["_links"] == {"self": {"href": f"/v1/controllers/{device.serial}"}}


def assert_her_devices(devices: dict[str, dict[str, Any]], owner_id: int) -> None:
    """Exactly her controllers, in registration order, with the fields the libraries read."""
    assert list(devices) == [device.serial for device in HERS]
    for device in HERS:
        assert_controller(devices[device.serial], device, owner_id)


def assert_settings(settings: dict[str, Any], device: Device, owner_id: int) -> None:
    assert_controller(settings["controller"], device, owner_id)
    assert settings["_links"] == {"self": {"href": f"/v1/controllers/{device.serial}"}}


def assert_not_found(error: Any, device: Device) -> None:
    """The libraries raise with the body only (no status) when a read fails: read the body."""
    problem = json.loads(error.message)
    assert problem["status"] == 404
    assert device.serial in problem["detail"]


def test_clients_create_registers_the_libraries_short_secret_with_one_warning(
    deployment: Deployment,
) -> None:
    """The published apps' secret is short and public: accepted, but the operator is told."""
    created = ok(deployment.client_created)
    warnings = created.stderr.splitlines()
    assert len(warnings) == 1, created.stderr
    assert warnings[0].startswith("Warning: the secret of mclimate is shorter than 16")
    assert f"client_secret: {LIBRARIES_APP.secret}" in created.stdout.splitlines()


@pytest.mark.parametrize("library", SYNC_CLASSES, ids=lambda c: c.__name__)
def test_sync_library_logs_in_lists_her_controllers_and_reads_each(
    library: type, deployment: Deployment
) -> None:
    client = library(username=OWNER, password=OWNER_PASSWORD)  # logs in
    assert_logged_in(client)

    devices = client.fetch_devices()
    assert devices is client.devices
    assert_her_devices(devices, deployment.owner_id)

    for device in HERS:
        assert_settings(client.cur_settings(device.serial), device, deployment.owner_id)
    for device in NOT_HERS:
        with pytest.raises(api_exception(library)) as raised:
            client.cur_settings(device.serial)
        assert_not_found(raised.value, device)


@pytest.mark.parametrize("library", SYNC_CLASSES, ids=lambda c: c.__name__)
def test_sync_library_raises_its_api_exception_with_400_on_a_wrong_password(
    library: type,
) -> None:
    with pytest.raises(api_exception(library)) as raised:
        library(username=OTHER, password="not-the-password")
    assert raised.value.status_code == 400
    assert "invalid_grant" in raised.value.message


@pytest.mark.parametrize("library", ASYNC_CLASSES, ids=lambda c: c.__name__)
async def test_async_library_logs_in_lists_her_controllers_and_reads_each(
    library: type, deployment: Deployment
) -> None:
    client = library(username=OWNER, password=OWNER_PASSWORD)
    try:
        assert not client.have_connection
        await client.async_connect()
        assert_logged_in(client)

        devices = await client.async_fetch_devices()
        assert devices is client.devices
        assert_her_devices(devices, deployment.owner_id)

        for device in HERS:
            settings = await client.async_cur_settings(device.serial)
            assert_settings(settings, device, deployment.owner_id)
        for device in NOT_HERS:
            with pytest.raises(api_exception(library)) as raised:
                await client.async_cur_settings(device.serial)
            assert_not_found(raised.value, device)
    finally:
        await close(client)


@pytest.mark.parametrize("library", ASYNC_CLASSES, ids=lambda c: c.__name__)
async def test_async_library_raises_its_api_exception_with_400_on_a_wrong_password(
    library: type,
) -> None:
    client = library(username=OTHER, password="not-the-password")
    try:
        with pytest.raises(api_exception(library)) as raised:
            await client.async_connect()
        assert raised.value.status_code == 400
        assert "invalid_grant" in raised.value.message
        assert not client.have_connection
    finally:
        await close(client)


def assert_her_geofences(fetched: dict[str, Any], deployment: Deployment) -> None:
    """The libraries key the list by ``controller_id``: her two, in the original's shape."""
    assert fetched == deployment.geofences
    mine = fetched["MEL-100"]
    assert json.loads(mine["enter_command_fields"]) == {"state": 1, "mode": 2, "temp": 23, "fan": 0}
    assert (mine["active"], mine["enter_push"], mine["exit_push"]) == (1, 1, 0)
    assert mine["user_id"] == deployment.owner_id


@pytest.mark.parametrize("library", SYNC_CLASSES, ids=lambda c: c.__name__)
def test_sync_library_fetches_her_geofences(library: type, deployment: Deployment) -> None:
    client = library(username=OWNER, password=OWNER_PASSWORD)
    geofences = client.fetch_geofences()
    assert geofences is client.geofences
    assert_her_geofences(geofences, deployment)
    other = library(username=OTHER, password=OTHER_PASSWORD)
    assert other.fetch_geofences() == {}


@pytest.mark.parametrize("library", ASYNC_CLASSES, ids=lambda c: c.__name__)
async def test_async_library_fetches_her_geofences(library: type, deployment: Deployment) -> None:
    client = library(username=OWNER, password=OWNER_PASSWORD)
    try:
        await client.async_connect()
        geofences = await client.async_fetch_geofences()
        assert geofences is client.geofences
        assert_her_geofences(geofences, deployment)
    finally:
        await close(client)


async def close(client: Any) -> None:
    """The session does not own its connector (connector_owner=False): close both.

    Closing the session forgets the connector, so it is taken first.
    """
    connector = client.session.connector
    await client.session.close()
    if connector is not None and not connector.closed:
        await connector.close()
