"""What the end-to-end tests share: provisioning through the operators' own command line
before a server starts, then speaking to the server as an app does (log-ins, bearer
headers, waiting for devices to report, pointing the published libraries at it)."""

from __future__ import annotations

import asyncio
import csv
import re
import subprocess
import tempfile
import time
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx
import mclimate.async_wrapper
import mclimate.core
import mclimate.wrapper
import melissa.async_wrapper
import melissa.core
import melissa.wrapper
import pytest
from sqlalchemy.ext.asyncio import AsyncConnection

from devicecontrol.database.engine import Database
from devicecontrol.demo import data as demo
from tests.cli.support import assert_succeeded, run_cli_in_process
from tests.factories import bearer

ANA = "ana@example.com"

CliRun = Callable[..., subprocess.CompletedProcess[str]]
T = TypeVar("T")


@dataclass(frozen=True)
class Client:
    """An app, as ``clients create`` registers it and as it logs its users in."""

    client_id: str
    secret: str


DEMO = Client(demo.DEMO_CLIENT_ID, demo.DEMO_CLIENT_SECRET)  # what ``serve --demo`` adds
# the app the published clients (``melissa``, ``mclimate``) carry in their code
LIBRARIES_APP = Client("mclimate", "mclimate_core")


def ok(result: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    """The command's result, once it is known to have succeeded."""
    assert_succeeded(result)
    return result


# --- provisioning ----------------------------------------------------------------------


def controller(serial: str, mac: str, type: str = "smart_plug", **columns: str) -> dict[str, str]:
    """One row of ``controllers import``'s CSV (``owner``, ``claim_code``, ``name``, ...)."""
    return {"serial_number": serial, "mac": mac, "type": type, **columns}


def plugs(owner: str) -> list[dict[str, str]]:
    """Two smart plugs of ``owner``'s, SN-1 and SN-2, and SN-3 that nobody owns."""
    return [
        controller("SN-1", "aa:bb:cc:dd:ee:01", owner=owner),
        controller("SN-2", "aa:bb:cc:dd:ee:02", owner=owner),
        controller("SN-3", "aa:bb:cc:dd:ee:03", owner=""),
    ]


@dataclass
class Provisioned:
    """What the commands answered: ``clients create``'s result and each ``users create``'s."""

    client: subprocess.CompletedProcess[str] | None = None
    users: dict[str, subprocess.CompletedProcess[str]] = field(default_factory=dict)

    def user_id(self, username: str) -> int:
        created = self.users[username].stdout
        match = re.search(r"created user (\d+): ", created)
        assert match, created
        return int(match.group(1))


def write_controllers_csv(path: Path, rows: Sequence[Mapping[str, str]]) -> Path:
    """``rows`` as a CSV that ``controllers import`` reads, its columns in first-seen order."""
    columns = list(dict.fromkeys(column for row in rows for column in row))
    with path.open("w", newline="", encoding="utf-8") as file:
        writer = csv.DictWriter(file, fieldnames=columns, restval="")
        writer.writeheader()
        writer.writerows(rows)
    return path


def provision(
    database_url: str,
    *,
    client: Client | None = None,
    users: Mapping[str, str] | None = None,
    controllers: Iterable[Mapping[str, str]] = (),
    run: CliRun = run_cli_in_process,
    env: Mapping[str, str] | None = None,
) -> Provisioned:
    """``clients create``, ``users create`` for each username and password (the password
    typed at the prompt, twice), then one ``controllers import`` of ``controllers``, which
    registers them in their order; every command must succeed.

    ``run`` is ``run_cli_in_process`` (the same ``main``, without a Python start-up each)
    unless a test needs real processes (``tests.processes.run_cli``).
    """
    provisioned = Provisioned()
    if client is not None:
        provisioned.client = ok(run("clients", "create", client.client_id, "--secret",
                                    client.secret, database_url=database_url, env=env))  # fmt: skip
    for username, password in (users or {}).items():
        provisioned.users[username] = ok(run("users", "create", username,
                                             input=f"{password}\n{password}\n",
                                             database_url=database_url, env=env))  # fmt: skip
    rows = list(controllers)
    if rows:
        with tempfile.TemporaryDirectory() as directory:
            path = write_controllers_csv(Path(directory) / "controllers.csv", rows)
            ok(run("controllers", "import", str(path), database_url=database_url, env=env))
    return provisioned


# --- speaking to a server ----------------------------------------------------------------


def token_call(
    http: httpx.Client,
    client: Client,
    path: str,
    *,
    prefix: str = "/v1",
    headers: Mapping[str, str] | None = None,
    as_json: bool = False,
    **fields: str,
) -> httpx.Response:
    """POST {prefix}/auth/{path} (login, renew, revoke) with the client's credentials and
    ``fields``, which may replace them; form-encoded as most apps send it, or JSON."""
    body = {"client_id": client.client_id, "client_secret": client.secret, **fields}
    if as_json:
        return http.post(f"{prefix}/auth/{path}", json=body, headers=headers)
    return http.post(f"{prefix}/auth/{path}", data=body, headers=headers)


def log_in(
    http: httpx.Client,
    client: Client,
    username: str,
    password: str,
    *,
    prefix: str = "/v1",
    headers: Mapping[str, str] | None = None,
    **fields: str,
) -> httpx.Response:
    """POST {prefix}/auth/login, form-encoded; ``fields`` add to the form or replace what
    it holds (a wrong ``client_secret``, ``grant_type``...)."""
    credentials = {"username": username, "password": password, **fields}
    return token_call(http, client, "login", prefix=prefix, headers=headers, **credentials)


def tokens(http: httpx.Client, client: Client, username: str, password: str) -> dict[str, Any]:
    """The auth object of a log-in that must succeed."""
    response = log_in(http, client, username, password)
    assert response.status_code == 200, response.text
    return response.json()["auth"]


def bearer_of(http: httpx.Client, client: Client, username: str, password: str) -> dict[str, str]:
    """The Authorization header of a fresh log-in of ``username``."""
    return bearer(tokens(http, client, username, password)["access_token"])


def demo_bearer(http: httpx.Client, username: str = demo.DEMO_USER) -> dict[str, str]:
    """A demo user's Authorization header, on a server started with ``--demo``."""
    passwords = {demo.DEMO_USER: demo.DEMO_PASSWORD, demo.FRIEND_USER: demo.FRIEND_PASSWORD}
    return bearer_of(http, DEMO, username, passwords[username])


def wait_until_reporting(
    http: httpx.Client, headers: Mapping[str, str], serials: Iterable[str], deadline: float
) -> None:
    """Each device online and with a reading, as POST /v1/provider/fetch shows its owner,
    before ``deadline`` (``time.monotonic()``'s)."""
    for serial in serials:
        while True:
            response = http.post("/v1/provider/fetch", headers=headers,
                                 json={"serial_number": serial})  # fmt: skip
            provider = response.json()["provider"]
            if provider.get("online") and len(provider) > 1:
                break
            assert time.monotonic() < deadline, provider
            time.sleep(0.1)


def point_the_libraries_at(base_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The published clients (``melissa``, ``mclimate``) talk to ``base_url``.

    Their base URL is a module constant imported by name into each wrapper module, and read
    at call time: every copy is patched."""
    url = f"{base_url}/v1/%s"
    for module in (melissa.core, melissa.wrapper, melissa.async_wrapper):
        monkeypatch.setattr(module, "MELISSA_URL", url)
    for module in (mclimate.core, mclimate.wrapper, mclimate.async_wrapper):
        monkeypatch.setattr(module, "MCLIMATE_URL", url)


def in_database(
    database_url: str,
    work: Callable[[AsyncConnection], Coroutine[Any, Any, T]],
    *,
    writing: bool = True,
) -> T:
    """``work`` in one transaction on the server's database (a writing one unless
    ``writing`` is false), from a synchronous test; its result."""

    async def run() -> T:
        database = Database(database_url)
        try:
            async with database.write() if writing else database.read() as connection:
                return await work(connection)
        finally:
            await database.dispose()

    return asyncio.run(run())
