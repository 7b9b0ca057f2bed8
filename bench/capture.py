"""Capture the service's real answer to a scenario's request, for the ceiling to replay."""

from __future__ import annotations

import base64
import http.client
import json
from dataclasses import dataclass
from pathlib import Path

from bench.scenarios import Request

# added by uvicorn itself on both servers, or set by the ceiling from the body it sends
_NOT_REPLAYED = {"date", "server", "content-length", "transfer-encoding", "connection"}
TIMEOUT_S = 10


class CaptureError(RuntimeError):
    """The service did not answer a scenario's request with a success."""


@dataclass(frozen=True, slots=True)
class Answer:
    """One response: status, the headers worth replaying (lower-case names), the body."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes


def fetch(port: int, request: Request) -> Answer:
    """Send one request to a server on loopback; the headers end with content-length."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT_S)
    try:
        connection.request(request.method, request.path, body=request.body, headers=request.headers)
        response = connection.getresponse()
        body = response.read()
    finally:
        connection.close()
    headers = [
        (name.lower(), value)
        for name, value in response.getheaders()
        if name.lower() not in _NOT_REPLAYED
    ]
    headers.append(("content-length", str(len(body))))
    return Answer(response.status, headers, body)


def load(source: Path) -> Answer:
    """An answer stored by ``capture``."""
    stored = json.loads(source.read_text(encoding="utf-8"))
    headers = [(name, value) for name, value in stored["headers"]]
    return Answer(stored["status"], headers, base64.b64decode(stored["body"]))


def capture(port: int, request: Request, destination: Path) -> int:
    """Send one request, check it succeeded, store status, headers and body as JSON.

    Returns the body's size. The stored headers keep the service's content-type and any
    others it sends (no-store on the token endpoints), so the ceiling's bytes match.
    """
    answer = fetch(port, request)
    if not 200 <= answer.status < 300:
        raise CaptureError(
            f"{request.method} {request.path} answered {answer.status}: {answer.body[:300]!r}"
        )
    destination.write_text(
        json.dumps(
            {
                "status": answer.status,
                "headers": answer.headers,
                "body": base64.b64encode(answer.body).decode("ascii"),
            }
        ),
        encoding="utf-8",
    )
    return len(answer.body)
