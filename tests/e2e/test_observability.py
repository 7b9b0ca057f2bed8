"""A real `devicecontrol serve`: structured logs that hold no secret, and metrics across workers.

The secrets test runs every action that handles a secret (login, failed logins, renew,
revoke, a claim with a claim code, reassign, release, `users set-password`) at log level
debug, then searches everything the processes wrote for each secret and its SHA-256 digest.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from devicecontrol.controllers.identity import claim_code_digest
from devicecontrol.database.engine import POSTGRES_WRITE_POOL, SQLITE_WRITE_POOL
from tests.e2e.support import Client, controller, ok, provision, token_call
from tests.observability.scrape import parse, value
from tests.one_shot import ONE_SHOT
from tests.processes import run_cli, running_server

APP = Client("leak-check-app", "client-secret-Kq3vX9-never-logged")
WRONG_CLIENT_SECRET = "wrong-client-secret-Lp7-never-logged"
ANA, FRIEND = "ana@example.com", "friend@example.com"
PASSWORD = "ana-password-Vb41-never-logged"
FRIEND_PASSWORD = "friend-password-Zt08-never-logged"
NEW_PASSWORD = "ana-new-password-Hs52-never-logged"
WRONG_PASSWORD = "wrong-password-Qe19-never-logged"
PASSWORD_AS_USERNAME = "password-typed-as-username-Nw66"
CLAIM_CODE = "CLAIM-7F3K-92QD-NEVER-LOGGED"
WRONG_CLAIM_CODE = "WRONG-CLAIM-4J8M-NEVER-LOGGED"
DEBUG = {"DEVICECONTROL_LOG_LEVEL": "debug"}
REQUEST_ID = "trace-me-0001"


def output(result: subprocess.CompletedProcess[str]) -> str:
    """What a command that succeeded wrote."""
    return ok(result).stdout + result.stderr


def provision_at_debug(database_url: str) -> dict[str, int]:
    """A client, two users and three unowned controllers (one with a claim code), by real
    processes at log level debug; no password reaches what ``users create`` writes."""
    provisioned = provision(
        database_url,
        client=APP,
        users={ANA: PASSWORD, FRIEND: FRIEND_PASSWORD},
        controllers=[
            controller("SN-L-1", "aa:bb:cc:dd:ee:10", claim_code=CLAIM_CODE),
            controller("SN-L-2", "aa:bb:cc:dd:ee:20"),
            controller("SN-L-3", "aa:bb:cc:dd:ee:30", claim_code="OTHER-CODE-0000"),
        ],
        run=run_cli,
        env=DEBUG,
    )
    for email, password in ((ANA, PASSWORD), (FRIEND, FRIEND_PASSWORD)):
        assert password not in output(provisioned.users[email])
    return {email: provisioned.user_id(email) for email in (ANA, FRIEND)}


def exercise(http: httpx.Client) -> list[str]:
    """Every action that handles a secret; the tokens the server handed out."""
    login = token_call(http, APP, "login", username=ANA, password=PASSWORD)
    assert login.status_code == 200, login.text
    access, refresh = login.json()["auth"]["access_token"], login.json()["auth"]["refresh_token"]
    failures = [
        token_call(http, APP, "login", username=ANA, password=WRONG_PASSWORD),
        token_call(http, APP, "login", username=PASSWORD_AS_USERNAME, password=WRONG_PASSWORD),
        token_call(
            http, APP, "login", username=ANA, password=PASSWORD, client_secret=WRONG_CLIENT_SECRET
        ),
    ]
    assert [r.status_code for r in failures] == [400, 400, 401]
    renewed = token_call(http, APP, "renew", refresh_token=refresh)
    assert renewed.status_code == 200, renewed.text
    renewed_access = renewed.json()["auth"]["access_token"]
    auth = {"Authorization": f"Bearer {renewed_access}"}
    base = "/v1/controllers"
    claimed = http.post(
        f"{base}/SN-L-1/assign",
        json={"claim_code": CLAIM_CODE},
        headers={**auth, "X-Request-ID": REQUEST_ID},
    )
    assert claimed.status_code == 200, claimed.text
    assert claimed.headers["x-request-id"] == REQUEST_ID
    refused = http.post(
        f"{base}/SN-L-3/assign", json={"claim_code": WRONG_CLAIM_CODE}, headers=auth
    )
    assert refused.status_code == 403, refused.text
    assert http.post(f"{base}/SN-L-2/assign", headers=auth).status_code == 200
    moved = http.patch(f"{base}/SN-L-1/reassign", json={"owner": FRIEND}, headers=auth)
    assert moved.status_code == 200, moved.text
    assert http.delete(f"{base}/SN-L-2/assign", headers=auth).status_code == 200
    assert token_call(http, APP, "revoke", token=access).status_code == 200
    revoked = http.get("/v1/users/me", headers={"Authorization": f"Bearer {access}"})
    assert revoked.status_code == 401
    return [access, refresh, renewed_access]


def forbidden_strings(tokens: list[str]) -> list[str]:
    secrets = [
        APP.secret,
        WRONG_CLIENT_SECRET,
        PASSWORD,
        FRIEND_PASSWORD,
        NEW_PASSWORD,
        WRONG_PASSWORD,
        PASSWORD_AS_USERNAME,
        CLAIM_CODE,
        WRONG_CLAIM_CODE,
        *tokens,
    ]
    digests = [hashlib.sha256(s.encode()).hexdigest() for s in secrets]
    claim_digests = [
        claim_code_digest("SN-L-1", CLAIM_CODE),
        claim_code_digest("SN-L-3", WRONG_CLAIM_CODE),
    ]
    return [*secrets, *digests, *claim_digests, "$argon2"]


def json_lines(text: str) -> list[dict[str, Any]]:
    """Every line parsed: the JSON format leaves no line that is not one object."""
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def events(lines: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [line for line in lines if line.get("event") == name]


def test_no_secret_reaches_a_log_and_every_audit_event_does(database_url, tmp_path):
    user_ids = provision_at_debug(database_url)
    with (
        running_server(database_url, tmp_path, env=DEBUG) as server,
        httpx.Client(base_url=server.base_url, timeout=10) as http,
    ):
        tokens = exercise(http)
    changed = run_cli(
        "users",
        "set-password",
        ANA,
        "--password",
        NEW_PASSWORD,
        database_url=database_url,
        env=DEBUG,
    )
    disabled = run_cli("users", "disable", FRIEND, database_url=database_url, env=DEBUG)
    cli_output = output(changed) + output(disabled)
    written = server.stdout() + server.stderr() + cli_output
    leaked = [s for s in forbidden_strings(tokens) if s.lower() in written.lower()]
    assert not leaked, f"in the logs: {leaked}"

    lines = json_lines(server.stderr())
    ana, friend = user_ids[ANA], user_ids[FRIEND]
    logins = [
        (e["outcome"], e.get("reason"), e["user_id"], e["client_id"])
        for e in events(lines, "login")
    ]
    assert logins == [
        ("success", None, ana, APP.client_id),
        ("failure", "invalid_grant", ana, APP.client_id),
        ("failure", "invalid_grant", None, APP.client_id),
        ("failure", "invalid_client", None, APP.client_id),
    ]
    assert all(e["client_address"] == "127.0.0.1" for e in events(lines, "login"))
    [renew] = events(lines, "renew")
    assert (renew["outcome"], renew["user_id"], renew["client_id"]) == (
        "success",
        ana,
        APP.client_id,
    )
    [revoke] = events(lines, "revoke")
    assert (revoke["outcome"], revoke["client_id"]) == ("success", APP.client_id)
    assigns = [(e["outcome"], e["serial_number"], e["user_id"]) for e in events(lines, "assign")]
    assert assigns == [
        ("success", "SN-L-1", ana),
        ("failure", "SN-L-3", ana),
        ("success", "SN-L-2", ana),
    ]
    [reassign] = events(lines, "reassign")
    assert (reassign["serial_number"], reassign["new_owner_id"]) == ("SN-L-1", friend)
    [release] = events(lines, "release")
    assert (release["outcome"], release["serial_number"]) == ("success", "SN-L-2")
    # the claim's request line and audit line share the client's request id
    traced = [line for line in lines if line.get("request_id") == REQUEST_ID]
    assert {line["event"] for line in traced} == {"request", "assign"}
    cli_lines = json_lines(changed.stderr) + json_lines(disabled.stderr)
    assert [(e["event"], e["user_id"]) for e in cli_lines] == [
        ("password_change", ana),
        ("user_disable", friend),
    ]

    requests = events(lines, "request")
    assert len(requests) == len({r["request_id"] for r in requests})
    claim = next(r for r in requests if r["request_id"] == REQUEST_ID)
    assert claim["route"] == "/v1/controllers/{serial_number}/assign"
    assert (claim["method"], claim["status"], claim["user_id"]) == ("POST", 200, ana)
    assert claim["client"] == "127.0.0.1" and claim["duration_ms"] > 0
    # uvicorn's own access log is off: the request lines replace it
    assert "HTTP/1.1" not in server.stderr() + server.stdout()


@pytest.mark.parametrize("backend", ["sqlite"])
def test_text_format_is_one_readable_line_per_request(database_url, tmp_path):
    """On SQLite only: how a line is written is the logging's, the same on every backend."""
    with (
        running_server(database_url, tmp_path, "--log-format", "text") as server,
        httpx.Client(base_url=server.base_url, timeout=10) as http,
    ):
        response = http.get("/v1/users/me", headers={"X-Request-ID": "text-format-1"})
        assert response.status_code == 401
    [line] = [x for x in server.stderr().splitlines() if "request_id=text-format-1" in x]
    assert re.fullmatch(
        r"\S+Z INFO request request_id=text-format-1 method=GET route=/v1/users/me status=401 "
        r"duration_ms=[0-9.]+ client=127\.0\.0\.1",
        line,
    ), line
    assert not [x for x in server.stderr().splitlines() if x.startswith("{")]


def test_a_bad_log_format_variable_stops_serve_in_one_line(tmp_path):
    result = run_cli(
        "serve",
        database_url=f"sqlite:///{tmp_path / 'x.db'}",
        env={"DEVICECONTROL_LOG_FORMAT": "xml"},
        cwd=tmp_path,
    )
    assert result.returncode == 1
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert "DEVICECONTROL_LOG_FORMAT" in result.stderr


def metrics_dirs(tmp: Path) -> list[Path]:
    return list(tmp.glob("devicecontrol-metrics-*"))


def test_metrics_of_several_workers_are_summed_whichever_answers(database_url, backend, tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {"TMPDIR": str(tmp)}
    with running_server(database_url, tmp_path, "--workers", "2", env=env) as server:
        assert len(metrics_dirs(tmp)) == 1
        for _ in range(20):  # a new connection each: the kernel spreads them over the workers
            assert ONE_SHOT.get(f"{server.base_url}/healthz", timeout=10).status_code == 200
        write_pool = SQLITE_WRITE_POOL if backend == "sqlite" else POSTGRES_WRITE_POOL
        # each worker samples its pools every second: wait for both samples, not a fixed time
        deadline = time.monotonic() + 10
        while (
            value(
                parse(ONE_SHOT.get(f"{server.base_url}/metrics", timeout=10).text),
                "devicecontrol_db_pool_size",
                pool="write",
            )
            != 2 * write_pool[0]
        ):
            assert time.monotonic() < deadline, "the workers' pool samples never added up"
            time.sleep(0.1)
        scrapes = [
            parse(ONE_SHOT.get(f"{server.base_url}/metrics", timeout=10).text) for _ in range(6)
        ]
    for samples in scrapes:
        total = value(
            samples,
            "devicecontrol_http_requests_total",
            route="/healthz",
            method="GET",
            status="200",
        )
        assert total == 20
        # two workers, each with its own pools: the sizes add up
        assert value(samples, "devicecontrol_db_pool_size", pool="write") == 2 * write_pool[0]
    assert metrics_dirs(tmp) == []  # serve removed its directory when it stopped


@pytest.mark.parametrize("backend", ["sqlite"])
def test_audit_lines_are_written_even_when_the_log_level_is_warning(database_url, tmp_path):
    """On SQLite only: which lines a level lets through is the logging's, the same on every
    backend (the secrets test above checks every audit event on both)."""
    quiet = {"DEVICECONTROL_LOG_LEVEL": "warning"}
    with (
        running_server(database_url, tmp_path, env=quiet) as server,
        httpx.Client(base_url=server.base_url, timeout=10) as http,
    ):
        refused = token_call(http, APP, "login", username=ANA, password=WRONG_PASSWORD)
        assert refused.status_code == 401  # no such client in this database
    lines = json_lines(server.stderr())
    [login] = events(lines, "login")
    assert (login["outcome"], login["reason"]) == ("failure", "invalid_client")
    assert events(lines, "request") == []
