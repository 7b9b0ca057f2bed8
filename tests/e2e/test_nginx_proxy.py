"""The deployment of deploy/: nginx ends TLS in front of two `serve` processes on PostgreSQL.

Each test starts two real servers on one PostgreSQL database and a real nginx (the Debian
package) running deploy/nginx/devicecontrol.conf.template, then speaks HTTPS to nginx with
the generated certificate as the only trusted one. The servers trust nginx's
X-Forwarded-For (DEVICECONTROL_TRUSTED_PROXIES=127.0.0.1, the address nginx connects from),
so clients bound to distinct loopback addresses are told apart by the login throttle.
PostgreSQL only: it is the database a multi-process deployment runs on.
"""

from __future__ import annotations

import json
import os
import signal
import ssl
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.conftest import POSTGRESQL_ONLY
from tests.e2e.support import ANA, Client, bearer_of, controller, log_in, provision
from tests.nginx import Certificate, Nginx, make_self_signed_certificate, running_nginx
from tests.one_shot import ONE_SHOT
from tests.processes import Server, running_servers
from tests.webapp.support import csrf_token_of

pytestmark = POSTGRESQL_ONLY

APP = Client("proxy-app", "proxy-client-secret-0123456789")
BOB = "bob@example.com"
PASSWORD = "proxy-password-1"
HTTP_TIMEOUT_S = 15  # every request of this file is bounded
STOP_TIMEOUT_S = 40  # a serve process drains for at most 30 s after SIGTERM
PROBLEM_JSON = "application/problem+json"
BEHIND_NGINX = {
    "DEVICECONTROL_TRUSTED_PROXIES": "127.0.0.1",
    "DEVICECONTROL_THROTTLE_LOGIN_PER_ADDRESS": "3/60",
}


# a client, ana and bob, then PX-OWNED (ana's) and the unowned PX-FREE, in that order
USERS = {ANA: PASSWORD, BOB: PASSWORD}
CONTROLLERS = [
    controller("PX-OWNED", "02:00:00:00:00:01", "melissa", owner=ANA),
    controller("PX-FREE", "02:00:00:00:00:02", owner=""),
]


@dataclass
class Deployment:
    nginx: Nginx
    servers: list[Server]
    certificate: Certificate
    upstreams: list[str]  # host:port of each process, as nginx's access log names them

    def client(self, source: str = "127.0.0.1") -> httpx.Client:
        """HTTPS to nginx from ``source``, trusting the generated certificate and nothing else."""
        trusted = ssl.create_default_context(cafile=str(self.certificate.certificate))
        transport = httpx.HTTPTransport(verify=trusted, local_address=source, trust_env=False)
        return httpx.Client(
            base_url=self.nginx.base_url,
            transport=transport,
            timeout=HTTP_TIMEOUT_S,
            trust_env=False,  # no proxy from the environment between the test and nginx
        )


@contextmanager
def deployed(database_url: str, tmp_path: Path) -> Iterator[Deployment]:
    """Two serve processes and nginx before them; all stopped when the block ends."""
    workdirs = [tmp_path / "serve-a", tmp_path / "serve-b"]
    with running_servers(database_url, workdirs, BEHIND_NGINX) as servers:
        certificate = make_self_signed_certificate(tmp_path)
        upstreams = [server.base_url.removeprefix("http://") for server in servers]
        with running_nginx(tmp_path / "nginx", upstreams, certificate) as nginx:
            yield Deployment(nginx, servers, certificate, upstreams)


def serials(http: httpx.Client, headers: dict[str, str]) -> list[str]:
    response = http.get("/v1/controllers", headers=headers)
    assert response.status_code == 200, response.text
    return [c["serial_number"] for c in response.json()["_embedded"]["controller"]]


def assert_problem(response: httpx.Response, status: int) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith(PROBLEM_JSON)
    problem = json.loads(response.content)
    assert problem["status"] == status
    return problem


def stop(server: Server) -> None:
    """SIGTERM, as an operator's rolling restart sends it; the test's own stop is then a no-op."""
    os.killpg(server.process.pid, signal.SIGTERM)
    server.process.wait(timeout=STOP_TIMEOUT_S)


def test_login_list_assign_stream_and_reassign_through_nginx_over_verified_tls(
    database_url, tmp_path
):
    provision(database_url, client=APP, users=USERS, controllers=CONTROLLERS)
    with deployed(database_url, tmp_path) as deployment, deployment.client() as http:
        ana = bearer_of(http, APP, ANA, PASSWORD)
        assert serials(http, ana) == ["PX-OWNED"]

        # a stream through nginx: its events arrive as they happen, none held in a buffer
        # (a buffered one would time this client's read out)
        with http.stream("GET", "/v1/controllers/events", headers=ana) as events:
            assert events.headers["content-type"].startswith("text/event-stream")
            lines = events.iter_lines()
            assert "PX-OWNED" in next(line for line in lines if line.startswith("data:"))
            with deployment.client() as other:
                assigned = other.post("/v1/controllers/PX-FREE/assign", headers=ana)
            assert next(line for line in lines if line.startswith("data:")) == (
                'data: {"serial_number":"PX-FREE","online":false}'
            )
        assert assigned.status_code == 200, assigned.text
        assert assigned.json()["controller_reassign"]["serial_number"] == "PX-FREE"
        assert serials(http, ana) == ["PX-OWNED", "PX-FREE"]

        handed = http.patch("/v1/controllers/PX-FREE/reassign", headers=ana, json={"owner": BOB})
        assert handed.status_code == 200, handed.text
        assert handed.json()["controller_reassign"]["deleted_at"] is None
        assert serials(http, ana) == ["PX-OWNED"]
        bob = bearer_of(http, APP, BOB, PASSWORD)
        assert serials(http, bob) == ["PX-FREE"]
        assert http.get("/v1/controllers/PX-FREE", headers=ana).status_code == 404

        assert handed.headers["strict-transport-security"] == "max-age=31536000"
        assert handed.headers["server"] == "nginx"  # no version
        # the requests were spread over both processes, and each answered
        access_log = deployment.nginx.access_log()
        for upstream in deployment.upstreams:
            assert f"upstream={upstream} " in access_log, access_log

        # the web app through nginx: its cookie is Secure (nginx's X-Forwarded-Proto, from
        # a trusted proxy), a change from the page's own origin (with its port) is taken,
        # and the session opens the live stream
        origin = {"HX-Request": "true", "Origin": deployment.nginx.base_url}
        form = {"username": BOB, "password": PASSWORD}
        logged_in = http.post("/app/login", data=form, headers=origin)
        assert logged_in.headers.get("hx-redirect") == "/app/", logged_in.text
        cookie = logged_in.headers["set-cookie"]
        assert "; secure" in cookie.lower() and "httponly" in cookie.lower(), cookie
        page = http.get("/app/")
        assert page.status_code == 200 and 'data-serial="PX-FREE"' in page.text
        assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
        token = csrf_token_of(page.text)
        claimed = http.post(
            "/app/claim",
            data={"serial_number": "PX-OWNED"},
            headers={**origin, "X-CSRF-Token": token},
        )
        assert claimed.status_code == 409, claimed.text  # the API's rule, in words
        with http.stream("GET", "/v1/controllers/events") as events:
            assert events.headers["content-type"].startswith("text/event-stream")
            lines = events.iter_lines()
            assert "PX-FREE" in next(line for line in lines if line.startswith("data:"))

        # and the verification is real: trusting only the public authorities, it fails
        with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            ONE_SHOT.get(f"{deployment.nginx.base_url}/v1/users/me", timeout=HTTP_TIMEOUT_S)


def test_the_login_throttle_sees_the_client_address_nginx_forwards(database_url, tmp_path):
    provision(database_url, client=APP, users=USERS, controllers=CONTROLLERS)
    with (
        deployed(database_url, tmp_path) as deployment,
        deployment.client("127.0.0.5") as guesser,
        deployment.client("127.0.0.6") as neighbour,
    ):
        # three failures from 127.0.0.5 (the limit), on both processes, with three usernames
        # so that no per-username limit is reached; a forged X-Forwarded-For changes nothing
        for number in range(3):
            forged = {"X-Forwarded-For": f"198.51.100.{number}"}
            failed = log_in(guesser, APP, f"nobody{number}@example.com", PASSWORD, headers=forged)
            assert failed.status_code == 400, failed.text
        for headers in ({}, {"X-Forwarded-For": "127.0.0.6"}):
            throttled = log_in(guesser, APP, ANA, PASSWORD, headers=headers)
            assert_problem(throttled, 429)
            assert 1 <= int(throttled.headers["retry-after"]) <= 61

        # the neighbour shares nginx, both processes and the database, but not the address
        assert log_in(neighbour, APP, ANA, PASSWORD).status_code == 200
        assert log_in(neighbour, APP, "nobody0@example.com", PASSWORD).status_code == 400

    access_log = deployment.nginx.access_log()
    assert access_log.count("127.0.0.5 [") == 5, access_log
    assert access_log.count("127.0.0.6 [") == 2, access_log


def test_nginx_refuses_big_bodies_and_moves_on_when_a_process_stops(database_url, tmp_path):
    provision(database_url, client=APP, users=USERS, controllers=CONTROLLERS)
    with deployed(database_url, tmp_path) as deployment, deployment.client() as http:
        too_big = http.post("/v1/auth/login", json={"password": "x" * 65 * 1024})
        assert_problem(too_big, 413)
        # a body under the limit is the service's to judge (a field over 1024 characters)
        under = http.post("/v1/auth/login", json={"password": "x" * 60 * 1024})
        assert_problem(under, 400)
        # metrics are scraped from each process, never through the public proxy
        assert_problem(http.get("/metrics"), 404)
        direct = ONE_SHOT.get(f"{deployment.servers[0].base_url}/metrics", timeout=HTTP_TIMEOUT_S)
        assert direct.status_code == 200, direct.text

        # a rolling restart: one process stops; nginx sends every request to the other
        first, second = deployment.servers
        stop(first)
        for _ in range(4):
            ana = bearer_of(http, APP, ANA, PASSWORD)
            assert serials(http, ana) == ["PX-OWNED"]

        # both gone: the service's own 503 shape, not an HTML error page
        stop(second)
        down = http.get("/v1/users/me", headers=ana)
        assert_problem(down, 503)
        assert down.headers["retry-after"] == "5"
