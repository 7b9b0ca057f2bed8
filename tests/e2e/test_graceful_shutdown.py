"""SIGTERM stops `devicecontrol serve` cleanly: new connections are refused at once, a request
in flight still gets its answer, and the process exits 0, with one worker and with two.

The request in flight is a login spoken over a raw socket: its headers carry
``Expect: 100-continue``, so the server's ``100 Continue`` proves the handler is running
and waiting for the body; half of the body follows, then SIGTERM goes to the serve process
(the parent, as ``kill PID`` or systemd sends it), and only once new connections are
refused does the rest of the body go out. The answer must be the 200 of a real login.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from urllib.parse import urlencode

import pytest

from tests.e2e.support import Client, provision
from tests.processes import Server, running_server

CLIENT_ID = "graceful-app"
SECRET = "graceful-client-secret-0123456789"
USERNAME = "ana@example.com"
PASSWORD = "graceful-password-1"
SOCKET_TIMEOUT_S = 10  # every read and write of the raw socket is bounded
REFUSED_WITHIN_S = 5  # new connections must be refused this soon after SIGTERM
EXIT_WITHIN_S = 15  # after the last request's answer
SHORT_GRACE_S = 2
GROUP_GONE_WITHIN_S = 5


def port_of(server: Server) -> int:
    return int(server.base_url.rsplit(":", 1)[1])


def start_slow_login(port: int) -> tuple[socket.socket, bytes]:
    """A login whose handler is running, half its body sent; returns the socket and the rest."""
    body = urlencode({"client_id": CLIENT_ID, "client_secret": SECRET,
                      "username": USERNAME, "password": PASSWORD}).encode()  # fmt: skip
    head = (
        f"POST /v1/auth/login HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        "Content-Type: application/x-www-form-urlencoded\r\n"
        f"Content-Length: {len(body)}\r\nExpect: 100-continue\r\n\r\n"
    ).encode()
    connection = socket.create_connection(("127.0.0.1", port), timeout=SOCKET_TIMEOUT_S)
    connection.sendall(head)
    interim = connection.recv(1024)
    assert interim == b"HTTP/1.1 100 Continue\r\n\r\n", interim
    half = len(body) // 2
    connection.sendall(body[:half])
    return connection, body[half:]


def read_response(connection: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """Everything until the server closes the connection: status, headers, body."""
    received = b""
    while chunk := connection.recv(65536):
        received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(status_line.split()[1]), headers, body


def wait_until_refused(port: int) -> None:
    deadline = time.monotonic() + REFUSED_WITHIN_S
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
        except ConnectionRefusedError:
            return
        time.sleep(0.05)
    raise AssertionError(f"new connections still accepted {REFUSED_WITHIN_S} s after SIGTERM")


def assert_exits_cleanly(server: Server, within_s: float, *, quiet: bool = True) -> None:
    """Status 0 within the bound, no process of its group left; ``quiet``: no traceback."""
    try:
        status = server.process.wait(timeout=within_s)
    except subprocess.TimeoutExpired:
        message = f"serve still running {within_s} s later:\n{server.stderr()}"
        raise AssertionError(message) from None
    assert status == 0, f"serve exited with {status}:\n{server.stderr()}"
    if quiet:
        assert "Traceback" not in server.stderr(), server.stderr()
    # no worker outlives it (multiprocessing's helper process may take a moment to notice)
    deadline = time.monotonic() + GROUP_GONE_WITHIN_S
    while time.monotonic() < deadline:
        try:
            os.killpg(server.process.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    raise AssertionError(f"a process of serve's group outlived it by {GROUP_GONE_WITHIN_S} s")


@pytest.mark.parametrize("workers", [1, 2])
def test_sigterm_lets_a_request_in_flight_finish_and_exits_0(workers, database_url, tmp_path):
    provision(database_url, client=Client(CLIENT_ID, SECRET), users={USERNAME: PASSWORD})
    with running_server(database_url, tmp_path, "--workers", str(workers)) as server:
        port = port_of(server)
        connection, rest = start_slow_login(port)
        with connection:
            os.kill(server.process.pid, signal.SIGTERM)
            wait_until_refused(port)
            assert server.process.poll() is None  # still draining: it waits for our request
            connection.sendall(rest)
            status, headers, body = read_response(connection)
        assert status == 200, body
        assert headers["connection"] == "close"  # no further request on this connection
        assert len(json.loads(body)["auth"]["access_token"]) == 40
        assert_exits_cleanly(server, EXIT_WITHIN_S)


@pytest.mark.parametrize("backend", ["sqlite"])
def test_sigterm_waits_for_a_stalled_request_only_for_the_graceful_timeout(database_url, tmp_path):
    """On SQLite only: the request stalls before its body is read, so before any query, and
    the graceful timeout is the server's, the same on every backend (a request that does
    reach the database drains on both, above)."""
    provision(database_url, client=Client(CLIENT_ID, SECRET), users={USERNAME: PASSWORD})
    grace = str(SHORT_GRACE_S)
    with running_server(database_url, tmp_path, "--graceful-timeout", grace) as server:
        connection, _ = start_slow_login(port_of(server))
        with connection:  # the rest of the body never comes
            signalled = time.monotonic()
            os.kill(server.process.pid, signal.SIGTERM)
            # the cancelled request is logged as an error, with its traceback
            assert_exits_cleanly(server, SHORT_GRACE_S + EXIT_WITHIN_S, quiet=False)
            waited = time.monotonic() - signalled
        assert waited >= SHORT_GRACE_S - 0.5, f"exited after {waited:.1f} s, not waiting"
        assert "timeout graceful shutdown exceeded" in server.stderr(), server.stderr()
