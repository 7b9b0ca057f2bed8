"""python -m bench.hook: the broker hook's answers a second (issue 29's target: at least
2,000 authentications a second).

A throw-away database with a fleet imported by the operators' own CLI (every device with a
secret), a real ``devicecontrol serve`` running the hook on its own port, and wrk on
loopback asking it, as a broker would, in rotation over the fleet:

- ``authenticate``: EMQX's question with the device's right secret (one indexed read and
  a SHA-256 digest, no password hash);
- ``authorize``: a device's publication to its own ``state`` (no database);
- RabbitMQ's ``user``: the same login as a form, the token in the path.

The ceiling, in the same run: the hook's cheapest answer, a request without the token
(401 from the first middleware, before any routing).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from bench import wrk
from bench.databases import DEFAULT_POSTGRESQL_URL, throwaway_database
from bench.devices import SECRET, print_result, provision, serial, serving
from bench.scenarios import Request
from bench.servers import free_port

TOKEN = "bench-hook-token-not-for-production-0123456789"  # noqa: S105 (benchmark data only)
BEARER = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
FORM = {"Content-Type": "application/x-www-form-urlencoded"}
CONNECTIONS = 16  # wrk's


def requests_of(kind: str, devices: int) -> list[Request]:
    """One request per device of the fleet, of one kind."""
    made = []
    for n in range(devices):
        device = serial(n)
        if kind == "authenticate":
            body = {"clientid": device, "username": device, "password": SECRET,
                    "peerhost": f"10.0.{n // 250}.{n % 250 + 1}"}  # fmt: skip
            made.append(Request("POST", "/mqtt/authenticate", BEARER, json.dumps(body)))
        elif kind == "authorize":
            body = {"clientid": device, "username": device, "action": "publish",
                    "topic": f"devices/{device}/state"}  # fmt: skip
            made.append(Request("POST", "/mqtt/authorize", BEARER, json.dumps(body)))
        elif kind == "rabbitmq user":
            form = urlencode({"username": device, "password": SECRET, "client_id": device})
            made.append(Request("POST", f"/{TOKEN}/rabbitmq/user", FORM, form))
        else:  # the ceiling: no token
            made.append(Request("POST", "/mqtt/authenticate", {}, "{}"))
    return made


def drive(requests: list[Request], port: int, workdir: Path, args: argparse.Namespace) -> Any:
    script = wrk.write_script(requests, workdir / "hook.lua")
    command = wrk.command(
        script, port, duration_s=args.seconds, connections=args.connections, threads=2
    )
    done = subprocess.run(  # noqa: S603 (wrk, fixed arguments)
        command, capture_output=True, text=True, check=True, timeout=args.seconds + 30
    )
    return wrk.parse(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.hook", description=__doc__)
    parser.add_argument("--backend", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--postgresql-url", default=DEFAULT_POSTGRESQL_URL)
    parser.add_argument("--devices", type=int, default=1000)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--connections", type=int, default=CONNECTIONS)
    args = parser.parse_args()
    result = measure(args)
    print(f"backend {args.backend}, {args.devices:,} devices, {args.connections} connections")
    print_result(result, width=32, decimals=2)


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """The hook's answers a second and their p99, each against the ceiling (``python -m
    bench.devices --broker rabbitmq`` runs it too)."""
    result: dict[str, Any] = {}
    with (
        throwaway_database(args.backend, args.devices, args.postgresql_url) as database_url,
        tempfile.TemporaryDirectory(prefix="devicecontrol-bench-hook-") as directory,
    ):
        workdir = Path(directory)
        provision(database_url, args.devices, workdir)
        hook_port = free_port()
        env = {
            **os.environ,
            "DEVICECONTROL_LOG_LEVEL": "warning",
            "DEVICECONTROL_MQTT_LISTEN": f"127.0.0.1:{free_port()}",
            "DEVICECONTROL_BROKER_HOOK_LISTEN": f"127.0.0.1:{hook_port}",
            "DEVICECONTROL_BROKER_HOOK_TOKEN": TOKEN,
        }
        with serving(database_url, free_port(), env):
            drive(requests_of("ceiling", 10), hook_port, workdir, args)  # warm up
            for kind in ("ceiling", "authenticate", "authorize", "rabbitmq user"):
                run = drive(requests_of(kind, args.devices), hook_port, workdir, args)
                result[f"{kind} answers/s"] = run.rate
                result[f"{kind} p99 ms"] = run.p99_ms
                result[f"{kind} errors"] = run.errors
    ceiling = result["ceiling answers/s"]
    for kind in ("authenticate", "authorize", "rabbitmq user"):
        result[f"{kind} / ceiling"] = result[f"{kind} answers/s"] / ceiling
    return result


if __name__ == "__main__":
    main()
