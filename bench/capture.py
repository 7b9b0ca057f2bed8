"""Capture the service's real answer to a scenario's request, for the ceiling to replay."""

from __future__ import annotations

import base64
import http.client
import json
from pathlib import Path

from bench.scenarios import Request

# added by uvicorn itself on both servers, or set by the ceiling from the body it sends
_NOT_REPLAYED = {"date", "server", "content-length", "transfer-encoding", "connection"}
TIMEOUT_S = 10


class CaptureError(RuntimeError):
    """The service did not answer a scenario's request with a success."""


def capture(port: int, request: Request, destination: Path) -> int:
    """Send one request, check it succeeded, store status, headers and body as JSON.

    Returns the body's size. The stored headers keep the service's content-type and any
    others it sends (no-store on the token endpoints), so the ceiling's bytes match.
    """
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT_S)
    try:
        connection.request(request.method, request.path, body=request.body, headers=request.headers)
        response = connection.getresponse()
        body = response.read()
    finally:
        connection.close()
    if not 200 <= response.status < 300:
        raise CaptureError(
            f"{request.method} {request.path} answered {response.status}: {body[:300]!r}"
        )
    headers = [
        (name.lower(), value)
        for name, value in response.getheaders()
        if name.lower() not in _NOT_REPLAYED
    ]
    headers.append(("content-length", str(len(body))))
    destination.write_text(
        json.dumps(
            {
                "status": response.status,
                "headers": headers,
                "body": base64.b64encode(body).decode("ascii"),
            }
        ),
        encoding="utf-8",
    )
    return len(body)
