"""Real processes for the CLI and end-to-end tests: the command line, and a running server.

Every subprocess is bounded by a timeout and killed when the test ends, however it ends.
The children get the parent's environment without any DEVICECONTROL_* variable, so a
setting in the developer's shell never leaks into a test; tests pass what they need.
"""

from __future__ import annotations

import itertools
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.one_shot import ONE_SHOT

CLI_TIMEOUT_S = 60
SERVER_START_TIMEOUT_S = 30
DEVICECONTROL = [sys.executable, "-m", "devicecontrol"]


# Ports for servers the tests start: each pytest-xdist worker hands out its own block, below
# Linux's ephemeral range (32768-60999), so neither another worker nor an outgoing socket
# is given the same one. Asking the OS for port 0 instead could give two workers one port
# between the probe and the server's bind.
FIRST_TEST_PORT = 20000
PORTS_PER_WORKER = 1000
_port_sequence = itertools.count(random.randrange(PORTS_PER_WORKER))


def _xdist_worker_number() -> int:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")  # "gw3" under xdist
    return int(worker[2:]) if worker[2:].isdigit() else 0


def _can_bind(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A TCP port of this worker's block that nothing listens on right now.

    The block starts at a random place in each run, so two test runs at once (two
    checkouts on one machine) rarely meet, and a port found taken is skipped.
    """
    base = FIRST_TEST_PORT + _xdist_worker_number() * PORTS_PER_WORKER
    for _ in range(PORTS_PER_WORKER):
        port = base + next(_port_sequence) % PORTS_PER_WORKER
        if _can_bind(port):
            return port
    raise RuntimeError(f"no free port in {base}-{base + PORTS_PER_WORKER - 1}")


def child_environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The children's environment; a server's device link listens on a free port of its
    own unless the test names one (never the default 1884, which tests would share).

    Children hash passwords with the suite's minimal argon2 profile, as in-process tests do
    (production cost was most of an end-to-end test's time); a test about the real cost
    passes ``DEVICECONTROL_PASSWORD_HASHING=standard``.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEVICECONTROL_")}
    env["PYTHONUNBUFFERED"] = "1"
    env["DEVICECONTROL_PASSWORD_HASHING"] = "test-only-minimal"
    env.update(extra or {})
    env.setdefault("DEVICECONTROL_MQTT_LISTEN", f"127.0.0.1:{free_port()}")
    return env


def run_cli(
    *args: str,
    database_url: str | None = None,
    input: str | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """``devicecontrol ARGS [--database-url URL]`` to completion (killed after a minute)."""
    command = [*DEVICECONTROL, *args]
    if database_url is not None:
        command += ["--database-url", database_url]
    return subprocess.run(
        command,
        input=input if input is not None else "",
        capture_output=True,
        text=True,
        env=child_environment(env),
        cwd=cwd,
        timeout=CLI_TIMEOUT_S,
        check=False,
    )


@dataclass
class Server:
    process: subprocess.Popen[bytes]
    base_url: str
    stdout_path: Path
    stderr_path: Path
    mqtt_port: int  # its device link's broker

    def stdout(self) -> str:
        return self.stdout_path.read_text(encoding="utf-8")

    def stderr(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8")


def _stop(process: subprocess.Popen[bytes]) -> None:
    """Stop the server and any worker it forked: they share the session it was started in."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=10)
            return
        except subprocess.TimeoutExpired:
            continue


def _wait_until_answering(server: Server) -> None:
    deadline = time.monotonic() + SERVER_START_TIMEOUT_S
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise AssertionError(
                f"devicecontrol serve exited with status {server.process.returncode}:\n"
                f"{server.stdout()}\n{server.stderr()}"
            )
        try:
            # any HTTP answer (a 401 here) means the app is up and routing requests
            ONE_SHOT.get(f"{server.base_url}/v1/users/me", timeout=2)
            return
        except httpx.TransportError:
            time.sleep(0.1)
    raise AssertionError(
        f"devicecontrol serve did not answer within {SERVER_START_TIMEOUT_S} s:\n"
        f"{server.stdout()}\n{server.stderr()}"
    )


@contextmanager
def running_server(
    database_url: str,
    workdir: Path,
    *extra_args: str,
    env: Mapping[str, str] | None = None,
    device_link: bool = False,
    open_files: int | None = None,
) -> Iterator[Server]:
    """``devicecontrol serve`` on a free port, answering HTTP; stopped when the block ends.

    Without its device link (``--no-device-link``) unless the test is about devices: the
    link is a process of its own, and its start and CPU were a large part of the suite.
    ``open_files`` starts it under ``ulimit -n`` of that many (its children inherit it).
    """
    port = free_port()
    stdout_path, stderr_path = workdir / "serve.stdout", workdir / "serve.stderr"
    command = [
        *DEVICECONTROL,
        "serve",
        "--port",
        str(port),
        "--database-url",
        database_url,
        *([] if device_link else ["--no-device-link"]),
        *extra_args,
    ]
    if open_files is not None:
        command = ["sh", "-c", f'ulimit -n {open_files} && exec "$@"', "sh", *command]
    environment = child_environment(env)
    mqtt_port = int(environment["DEVICECONTROL_MQTT_LISTEN"].rpartition(":")[2])
    with stdout_path.open("wb") as stdout, stderr_path.open("wb") as stderr:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            env=environment,
            cwd=workdir,
            start_new_session=True,
        )
    server = Server(process, f"http://127.0.0.1:{port}", stdout_path, stderr_path, mqtt_port)
    try:
        _wait_until_answering(server)
        yield server
    finally:
        _stop(process)


@contextmanager
def running_servers(
    database_url: str, workdirs: Sequence[Path], env: Mapping[str, str] | None = None
) -> Iterator[list[Server]]:
    """``running_server`` in each of ``workdirs`` (made here) on one database, started side
    by side, as each start-up costs seconds; all stopped when the block ends.

    None may have logged a traceback by then.
    """
    starting = []
    for workdir in workdirs:
        workdir.mkdir()
        starting.append(running_server(database_url, workdir, env=env))
    with ExitStack() as stack:
        with ThreadPoolExecutor(max_workers=len(starting)) as pool:
            futures = [pool.submit(server.__enter__) for server in starting]
        for server, future in zip(starting, futures, strict=True):
            if future.exception() is None:
                stack.push(server)  # stopped by the stack, whatever happens next
        servers = [future.result() for future in futures]
        yield servers
        for server in servers:
            assert "Traceback" not in server.stderr(), server.stderr()
