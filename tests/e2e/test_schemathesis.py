"""Fuzzing: schemathesis against the served OpenAPI document of a real `devicecontrol serve`.

The server runs on a demo-filled database (each backend); schemathesis loads
``/openapi.json`` and sends every documented operation generated requests, valid and
invalid, with the demo user's bearer token. The checks: never a 5xx, every status,
content type, body and header as documented, and every request the document calls invalid
rejected. Bounded: a fixed number of examples per operation and seed, one worker, a
subprocess timeout; loopback only.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from devicecontrol.demo import data as demo
from tests.e2e.support import DEMO, tokens
from tests.one_shot import ONE_SHOT
from tests.processes import child_environment, running_server

CHECKS = (
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_schema_conformance",
    "response_headers_conformance",
    "negative_data_rejection",
)
# examples per operation (31 operations). Fewer on PostgreSQL: what the checks hold (status
# codes, media types, schemas, invalid requests refused) is decided before any query, the
# same on both backends; what differs by backend, hostile values reaching the database
# (NUL, numbers out of range, over-long text...), tests/test_hostile_input.py sends on both,
# value by value. The PostgreSQL half still catches a 5xx that only its driver raises.
MAX_EXAMPLES = {"sqlite": 12, "postgresql": 6}
SEED = 20261121
STREAMS = r"/events$"
FUZZ_TIMEOUT_S = 240


def demo_token(base_url: str) -> str:
    with httpx.Client(base_url=base_url, timeout=10) as http:
        return tokens(http, DEMO, demo.DEMO_USER, demo.DEMO_PASSWORD)["access_token"]


def schemathesis_command(base_url: str, token: str, har: Path, max_examples: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "schemathesis.cli",
        "--no-color",
        "run",
        f"{base_url}/openapi.json",
        "--header",
        f"Authorization: Bearer {token}",
        "--checks",
        ",".join(CHECKS),
        "--max-examples",
        str(max_examples),
        "--seed",
        str(SEED),
        "--workers",
        "1",
        "--generation-database",
        "none",
        # the event streams never end (they are read as a client reads them, in
        # tests/events/): a request-and-response fuzzer would wait out its timeout on each
        "--exclude-path-regex",
        STREAMS,
        "--request-timeout",
        "10",
        "--report",
        "har",
        "--report-har-path",
        str(har),
    ]


def documented_operations(base_url: str) -> int:
    """The operations schemathesis tries: every documented one but the streams."""
    document = ONE_SHOT.get(f"{base_url}/openapi.json", timeout=10).json()
    return sum(
        len(path_item)
        for path, path_item in document["paths"].items()
        if not re.search(STREAMS, path)
    )


def sent(har: Path) -> list[tuple[str, str, str | None, int]]:
    """Method, path, body media type and status of every exchange schemathesis recorded."""
    entries = json.loads(har.read_text(encoding="utf-8"))["log"]["entries"]
    return [
        (
            entry["request"]["method"],
            urlsplit(entry["request"]["url"]).path,
            (entry["request"].get("postData") or {}).get("mimeType"),
            entry["response"]["status"],
        )
        for entry in entries
    ]


def test_schemathesis_finds_nothing_against_the_served_document(backend, database_url, tmp_path):
    har = tmp_path / "fuzz.har"
    with running_server(database_url, tmp_path, "--demo", device_link=True) as server:
        token = demo_token(server.base_url)
        command = schemathesis_command(server.base_url, token, har, MAX_EXAMPLES[backend])
        operations = documented_operations(server.base_url)
        done = subprocess.run(
            command,
            cwd=tmp_path,  # no schemathesis.toml here; its reports, if any, stay in tmp
            env=child_environment(),
            capture_output=True,
            text=True,
            timeout=FUZZ_TIMEOUT_S,
            check=False,
        )
        output = done.stdout + done.stderr
        assert done.returncode == 0, f"schemathesis exit {done.returncode}:\n{output}"
        tested = re.search(r"Tested:\s+(\d+)", output)
        assert tested and int(tested.group(1)) == operations == 31, output
    exchanges = sent(har)
    assert not [e for e in exchanges if e[3] >= 500], output
    # the token endpoints got form bodies as well as JSON ones, as existing clients send
    for endpoint in ("login", "renew", "revoke"):
        media_types = {e[2] for e in exchanges if e[:2] == ("POST", f"/v1/auth/{endpoint}")}
        assert {"application/json", "application/x-www-form-urlencoded"} <= media_types
