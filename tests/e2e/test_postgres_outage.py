"""PostgreSQL stopped under a running server: quick 503s, then recovery without a restart.

The test stops and starts a cluster of its own (tests/pg_instance.py), never the machine's
shared PostgreSQL. Before the outage the pool holds several live connections; the outage
kills them and refuses new ones, so both paths are exercised. Then the server comes back
refusing sessions (SQLSTATE 57P03, as while it starts up), and at last for real: the same
serve process answers 200 again, with the same token and the same data.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial

import httpx
import pytest

from tests.e2e.support import ANA, Client, log_in, plugs, provision
from tests.pg_instance import PostgresInstance
from tests.processes import Server, running_server

APP = Client("outage-app", "outage-client-secret-0123456789")
PASSWORD = "outage-password-123"
OUTAGE_ANSWER_LIMIT_S = 2.0
# above the limit, so a hang fails an assertion with a number instead of stalling the run
HTTP_TIMEOUT_S = 5.0
RECOVERY_DEADLINE_S = 10.0
POLL_INTERVAL_S = 0.02
OUTAGE_ROUNDS = 3
CONCURRENT_REQUESTS = 6
# ana's log-in as the contract's form has it, with its grant_type
ana_logs_in = partial(log_in, client=APP, username=ANA, password=PASSWORD, grant_type="password")


Request = Callable[[httpx.Client], httpx.Response]


def requests_of_every_kind(headers: dict[str, str]) -> dict[str, Request]:
    return {
        "login": ana_logs_in,
        "list controllers": lambda http: http.get("/v1/controllers", headers=headers),
        "profile": lambda http: http.get("/v1/users/me", headers=headers),
        "assign": lambda http: http.post("/v1/controllers/SN-3/assign", headers=headers),
    }


def timed(request: Request, http: httpx.Client) -> tuple[httpx.Response, float]:
    started = time.monotonic()
    response = request(http)
    return response, time.monotonic() - started


def assert_quick_503(response: httpx.Response, elapsed: float, name: str) -> None:
    assert response.status_code == 503, f"{name}: {response.status_code} {response.text}"
    assert elapsed < OUTAGE_ANSWER_LIMIT_S, f"{name} took {elapsed:.2f} s"
    assert response.headers["retry-after"].isdigit(), name
    assert response.headers["content-type"].startswith("application/problem+json"), name
    assert response.json()["status"] == 503, name


def assert_every_request_is_a_quick_503(http: httpx.Client, headers: dict[str, str]) -> list[float]:
    """Each kind of request a few times, then a concurrent burst; returns the latencies."""
    latencies = []
    for _ in range(OUTAGE_ROUNDS):
        for name, request in requests_of_every_kind(headers).items():
            response, elapsed = timed(request, http)
            assert_quick_503(response, elapsed, name)
            latencies.append(elapsed)
    profile = requests_of_every_kind(headers)["profile"]
    with ThreadPoolExecutor(CONCURRENT_REQUESTS) as pool:
        burst = list(pool.map(lambda _: timed(profile, http), range(CONCURRENT_REQUESTS)))
    for response, elapsed in burst:
        assert_quick_503(response, elapsed, "concurrent profile")
        latencies.append(elapsed)
    return latencies


def poll_until_200(http: httpx.Client, headers: dict[str, str]) -> list[tuple[float, int, float]]:
    """GET the profile until it answers 200 or the deadline passes: (when, status, took)."""
    answers = []
    deadline = time.monotonic() + RECOVERY_DEADLINE_S
    while time.monotonic() < deadline:
        response, elapsed = timed(lambda http: http.get("/v1/users/me", headers=headers), http)
        answers.append((time.monotonic(), response.status_code, elapsed))
        if response.status_code == 200:
            break
        time.sleep(POLL_INTERVAL_S)
    return answers


def serials(http: httpx.Client, headers: dict[str, str]) -> list[str]:
    listed = http.get("/v1/controllers", headers=headers)
    assert listed.status_code == 200, listed.text
    return [c["serial_number"] for c in listed.json()["_embedded"]["controller"]]


def assert_still_the_same_process(server: Server, pid: int) -> None:
    assert server.process.poll() is None, f"serve exited:\n{server.stderr()}"
    assert server.process.pid == pid


def milliseconds(latencies: list[float]) -> str:
    return f"{min(latencies) * 1000:.0f}-{max(latencies) * 1000:.0f} ms over {len(latencies)}"


@pytest.mark.parametrize("stop_mode", ["fast", "immediate"])
def test_stopped_postgresql_is_503_within_2_s_and_the_server_recovers_without_restart(
    stop_mode: str, private_cluster: PostgresInstance, tmp_path
):
    database_url = private_cluster.create_database("devicecontrol")
    provision(database_url, client=APP, users={ANA: PASSWORD}, controllers=plugs(ANA))
    with (
        running_server(database_url, tmp_path) as server,
        httpx.Client(base_url=server.base_url, timeout=HTTP_TIMEOUT_S) as http,
    ):
        pid = server.process.pid
        login = ana_logs_in(http)
        assert login.status_code == 200, login.text
        headers = {"Authorization": f"Bearer {login.json()['auth']['access_token']}"}
        assert http.get("/v1/controllers/SN-1", headers=headers).status_code == 200
        # concurrent requests leave several connections in the pool, all dead once it stops
        with ThreadPoolExecutor(CONCURRENT_REQUESTS) as pool:
            warm = list(pool.map(lambda _: http.get("/v1/users/me", headers=headers),
                                 range(CONCURRENT_REQUESTS)))  # fmt: skip
        assert [r.status_code for r in warm] == [200] * CONCURRENT_REQUESTS

        # stopped: the pooled connections are dead and new ones are refused
        private_cluster.stop(stop_mode)
        stopped = assert_every_request_is_a_quick_503(http, headers)
        # listening again but refusing sessions (57P03), as while it starts up
        private_cluster.start_refusing_connections()
        starting_up = assert_every_request_is_a_quick_503(http, headers)
        private_cluster.stop()
        assert_still_the_same_process(server, pid)

        # started again, polled from before the start so that its start-up is covered too
        with ThreadPoolExecutor(1) as pool:
            polling = pool.submit(poll_until_200, http, headers)
            start_at = time.monotonic()
            private_cluster.start()
            ready_at = time.monotonic()
            answers = polling.result()
        for _, status, elapsed in answers:
            assert status in (200, 503)
            assert elapsed < OUTAGE_ANSWER_LIMIT_S, f"a poll took {elapsed:.2f} s"
        first_200_at, status, _ = answers[-1]
        assert status == 200, f"no recovery within {RECOVERY_DEADLINE_S} s"
        print(
            f"\n[{stop_mode}] 503s while stopped: {milliseconds(stopped)}; while refusing "
            f"sessions: {milliseconds(starting_up)}; 200 again {first_200_at - start_at:.2f} s "
            f"after the start command (PostgreSQL ready after {ready_at - start_at:.2f} s), "
            f"{len(answers) - 1} polls answered 503 before"
        )

        # the same process, the token from before the outage, and nothing written during it
        assert_still_the_same_process(server, pid)
        assert http.get("/v1/users/me", headers=headers).json()["users"]["username"] == ANA
        assert serials(http, headers) == ["SN-1", "SN-2"]
        assert ana_logs_in(http).status_code == 200
        assigned = http.post("/v1/controllers/SN-3/assign", headers=headers)
        assert assigned.status_code == 200, assigned.text
        assert serials(http, headers) == ["SN-1", "SN-2", "SN-3"]

        # a restart between two requests costs no request an error: the pooled connections
        # it killed are found dead at checkout and replaced
        private_cluster.stop(stop_mode)
        private_cluster.start()
        with ThreadPoolExecutor(CONCURRENT_REQUESTS) as pool:
            after = list(pool.map(lambda _: http.get("/v1/users/me", headers=headers),
                                  range(CONCURRENT_REQUESTS)))  # fmt: skip
        assert [r.status_code for r in after] == [200] * CONCURRENT_REQUESTS
        assert_still_the_same_process(server, pid)

    # every outage answer was a deliberate 503, never an unhandled error
    stderr = server.stderr()
    assert "database unavailable" in stderr
    assert "Traceback" not in stderr and "unhandled error" not in stderr, stderr
