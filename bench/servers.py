"""The servers under test, as subprocesses on free loopback ports.

The service runs as ``devicecontrol serve`` exactly as an operator would start it; the
ceiling and the comparison apps (comparisons.py) run on the same uvicorn with the options
``serve`` passes (no proxy headers, no server header, the same log level and worker count),
so the servers differ only in the app.
"""

from __future__ import annotations

import http.client
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from bench.ceiling import RESPONSE_FILE_VARIABLE

BENCH_DIR = Path(__file__).resolve().parent
READY_TIMEOUT_S = 60
READY_POLL_S = 0.1
STOP_TIMEOUT_S = 15
# access logs would be a benchmark of the terminal; both servers log warnings and up only
LOG_LEVEL = "warning"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def service_command(port: int, workers: int, database_url: str) -> list[str]:
    return [
        sys.executable, "-m", "devicecontrol", "serve",
        "--port", str(port), "--workers", str(workers), "--database-url", database_url,
    ]  # fmt: skip


def bench_app_command(module: str, port: int, workers: int) -> list[str]:
    """uvicorn serving ``bench/<module>.py``'s ``create_app`` with the options ``serve`` uses."""
    return [
        sys.executable, "-m", "uvicorn", f"{module}:create_app", "--factory",
        "--app-dir", str(BENCH_DIR), "--host", "127.0.0.1", "--port", str(port),
        "--workers", str(workers), "--log-level", LOG_LEVEL,
        "--no-proxy-headers", "--no-server-header",
    ]  # fmt: skip


def ceiling_command(port: int, workers: int) -> list[str]:
    return bench_app_command("ceiling", port, workers)


def _wait_until_answering(process: subprocess.Popen[bytes], port: int) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with status {process.returncode}; see its log")
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            connection.request("GET", "/bench-ready")
            connection.getresponse().read()
            connection.close()
            return
        except OSError:
            time.sleep(READY_POLL_S)
    raise RuntimeError(f"server on port {port} did not answer within {READY_TIMEOUT_S} s")


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the server we started (uvicorn's supervisor ends its own workers)."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        # its own session (start_new_session): the group is this server and its workers only
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


@contextmanager
def running(
    argv: list[str], port: int, log: IO[bytes], env: dict[str, str]
) -> Iterator[subprocess.Popen[bytes]]:
    """Start a server, wait until it answers on ``port``, stop it on exit."""
    process = subprocess.Popen(  # noqa: S603 (our own argv)
        argv, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
    )
    try:
        _wait_until_answering(process, port)
        yield process
    finally:
        _stop(process)


def service_env(token_cache_ms: int | None = None) -> dict[str, str]:
    env = {**os.environ, "DEVICECONTROL_LOG_LEVEL": LOG_LEVEL}
    if token_cache_ms is not None:
        env["DEVICECONTROL_TOKEN_CACHE_MS"] = str(token_cache_ms)
    return env


def ceiling_env(response_file: Path) -> dict[str, str]:
    return {**os.environ, RESPONSE_FILE_VARIABLE: str(response_file)}


def comparison_env(variable: str, database: str) -> dict[str, str]:
    return {**os.environ, variable: database}
