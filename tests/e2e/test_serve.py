"""`devicecontrol serve` as a real process, spoken to over a real socket."""

from __future__ import annotations

import re
import socket
from collections.abc import Iterator
from functools import partial

import httpx
import pytest

from devicecontrol.demo import data as demo
from tests.conftest import POSTGRESQL_ONLY
from tests.e2e.support import ANA, DEMO, Client, log_in, plugs, provision, token_call
from tests.one_shot import ONE_SHOT
from tests.processes import Server, free_port, run_cli, running_server

APP = Client("e2e-app", "e2e-client-secret-0123456789")
PASSWORD = "e2e-password-123"
FORM = {"Content-Type": "application/x-www-form-urlencoded"}
# ana's log-in as the contract's form has it, with its grant_type
ana_logs_in = partial(log_in, client=APP, username=ANA, password=PASSWORD, headers=FORM,
                      grant_type="password")  # fmt: skip


def assert_token_response(response: httpx.Response, path: str) -> dict:
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/hal+json")
    assert response.headers["cache-control"] == "no-store"
    assert response.headers["pragma"] == "no-cache"
    body = response.json()
    assert body["_links"] == {"self": {"href": f"/v1/auth/{path}"}}
    auth = body["auth"]
    assert re.fullmatch(r"[0-9a-f]{40}", auth["access_token"])
    assert (auth["token_type"], auth["scope"]) == ("Bearer", None)
    return auth


@pytest.fixture(scope="module")
def provisioned_database_url(module_database_url: str) -> str:
    """The module's database with ana, her app and her plugs, for the servers below."""
    provision(module_database_url, client=APP, users={ANA: PASSWORD}, controllers=plugs(ANA))
    return module_database_url


@pytest.fixture(scope="module")
def provisioned_server(
    provisioned_database_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    """One provisioned server for the tests below, which only log in and read.

    Started with ``--demo``: on a database with data that adds nothing and serves as
    without it, which ``test_serve_demo_on_a_database_with_data_adds_none_but_serves``
    reads from this server's output.
    """
    workdir = tmp_path_factory.mktemp("serve")
    with running_server(provisioned_database_url, workdir, "--demo") as server:
        yield server


@pytest.fixture(scope="module")
def configured_server(
    provisioned_database_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    """A second server on the module's database: two workers, a token lifetime of 120 s."""
    env = {"DEVICECONTROL_ACCESS_TOKEN_TTL": "120"}
    workdir = tmp_path_factory.mktemp("serve-configured")
    with running_server(provisioned_database_url, workdir, "--workers", "2", env=env) as server:
        yield server


@pytest.mark.parametrize("prefix", ["/v1", ""], ids=["v1 paths", "unprefixed paths"])
def test_serve_logs_in_renews_lists_and_reads_over_a_real_socket(prefix, provisioned_server):
    with httpx.Client(base_url=provisioned_server.base_url, timeout=10) as http:
        auth = assert_token_response(ana_logs_in(http, prefix=prefix), "login")
        assert auth["expires_in"] == 86400
        assert re.fullmatch(r"[0-9a-f]{40}", auth["refresh_token"])
        renewed = assert_token_response(
            token_call(http, APP, "renew", prefix=prefix, headers=FORM,
                       refresh_token=auth["refresh_token"]),
            "renew",
        )  # fmt: skip
        assert "refresh_token" not in renewed
        assert renewed["access_token"] != auth["access_token"]

        headers = {"Authorization": f"Bearer {renewed['access_token']}"}
        listed = http.get(f"{prefix}/controllers", headers=headers)
        assert listed.status_code == 200
        assert listed.headers["content-type"].startswith("application/hal+json")
        body = listed.json()
        assert [c["serial_number"] for c in body["_embedded"]["controller"]] == ["SN-1", "SN-2"]
        assert body["total"] == 2
        one = http.get(f"{prefix}/controllers/SN-2", headers=headers)
        assert one.status_code == 200
        controller = one.json()["controller"]
        assert (controller["serial_number"], controller["mac"]) == ("SN-2", "AABBCCDDEE02")
        assert one.json()["_links"] == {"self": {"href": "/v1/controllers/SN-2"}}
        assert http.get(f"{prefix}/controllers/SN-3", headers=headers).status_code == 404
        me = http.get(f"{prefix}/users/me", headers=headers).json()["users"]
        assert me["username"] == "ana@example.com"


def test_serve_refuses_wrong_credentials_over_a_real_socket(provisioned_server):
    with httpx.Client(base_url=provisioned_server.base_url, timeout=10) as http:
        wrong_password = ana_logs_in(http, password="not-the-password")
        assert wrong_password.status_code == 400
        assert wrong_password.json()["error"] == "invalid_grant"
        wrong_secret = ana_logs_in(http, client_secret="not-the-secret-0123456789")
        assert wrong_secret.status_code == 401
        assert wrong_secret.json()["error"] == "invalid_client"
        assert http.get("/v1/controllers").status_code == 401


def assert_demo_works(server) -> None:
    assert demo.walkthrough(server.base_url, mqtt_port=server.mqtt_port) in server.stdout()
    assert "NO demo data was added" not in server.stdout()
    with httpx.Client(base_url=server.base_url, timeout=10) as http:
        auth = assert_token_response(
            log_in(http, DEMO, demo.DEMO_USER, demo.DEMO_PASSWORD), "login"
        )
        headers = {"Authorization": f"Bearer {auth['access_token']}"}
        listed = http.get("/v1/controllers", headers=headers).json()["_embedded"]["controller"]
        assert [c["serial_number"] for c in listed] == [
            "DEMO-MELISSA-1",
            "DEMO-PLUG-1",
            "DEMO-PLUG-3",
        ]


@POSTGRESQL_ONLY
def test_serve_demo_fills_an_empty_database_and_the_demo_login_works(database_url, tmp_path):
    """On PostgreSQL: on SQLite the test below fills an empty database, one it creates."""
    with running_server(database_url, tmp_path, "--demo") as server:
        assert_demo_works(server)


def test_serve_demo_creates_and_fills_a_new_sqlite_file(tmp_path):
    """A file that does not exist yet: created, migrated, found empty and filled."""
    path = tmp_path / "brand-new.db"
    with running_server(f"sqlite:///{path}", tmp_path, "--demo") as server:
        assert_demo_works(server)
    assert path.exists()


def test_serve_demo_on_a_database_with_data_adds_none_but_serves(provisioned_server):
    """The module's server: ``--demo`` on a database provisioned before it started."""
    server = provisioned_server
    assert "not empty" in server.stderr()
    # the banner itself says plainly that nothing was added, before the credentials
    banner = server.stdout()
    assert banner.startswith("The database already had data, so NO demo data was added")
    assert banner.index("NO demo data") < banner.index("Demo client:")
    with httpx.Client(base_url=server.base_url, timeout=10) as http:
        assert log_in(http, DEMO, demo.DEMO_USER, demo.DEMO_PASSWORD).status_code == 401
        assert_token_response(ana_logs_in(http), "login")


def test_serve_reads_the_token_lifetime_from_the_environment(configured_server):
    with httpx.Client(base_url=configured_server.base_url, timeout=10) as http:
        assert assert_token_response(ana_logs_in(http), "login")["expires_in"] == 120


def test_serve_with_two_workers_answers_from_both(configured_server):
    with httpx.Client(base_url=configured_server.base_url, timeout=10) as http:
        for _ in range(4):
            assert_token_response(ana_logs_in(http), "login")


@pytest.mark.parametrize(
    ("url", "env", "fragment"),
    [
        (None, {"DEVICECONTROL_LOG_LEVEL": "loud"}, "DEVICECONTROL_LOG_LEVEL"),
        (None, {"DEVICECONTROL_ACCESS_TOKEN_TTL": "abc"}, "DEVICECONTROL_ACCESS_TOKEN_TTL"),
        ("postgresql://postgres@127.0.0.1:1/nothing", {}, "database unavailable"),
        ("mysql://root@127.0.0.1/dc", {}, "unsupported database"),
    ],
    ids=["bad log level", "bad token lifetime", "unreachable database", "unsupported database"],
)
def test_serve_with_bad_settings_exits_1_in_one_line_without_listening(
    url, env, fragment, tmp_path
):
    port = str(free_port())
    database_url = url or f"sqlite:///{tmp_path / 'serve.db'}"
    result = run_cli("serve", "--port", port, database_url=database_url, env=env, cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert fragment in result.stderr


def test_serve_without_the_device_link_serves_http_and_leaves_the_mqtt_port_alone(tmp_path):
    """A second serve on one database runs no broker of its own (docs/OPERATIONS.md)."""
    mqtt_port = free_port()
    env = {"DEVICECONTROL_MQTT_LISTEN": f"127.0.0.1:{mqtt_port}"}
    url = f"sqlite:///{tmp_path / 'one.db'}"
    with running_server(url, tmp_path, "--no-device-link", env=env) as server:
        assert ONE_SHOT.get(f"{server.base_url}/healthz", timeout=10).status_code == 200
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", mqtt_port))  # nothing listens there
