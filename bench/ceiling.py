"""The ceiling: a bare ASGI app answering every request with one captured response.

Served by the same uvicorn, with the same options and workers, as the service: the distance
between the two is what the service itself costs (routing, auth, the database, encoding).
It reads the request body, as the service must, and sends the bytes the service sent for
the scenario's request. ``BENCH_CEILING_RESPONSE`` names the JSON file holding them
(``capture.py``); uvicorn loads this file with ``--app-dir bench --factory``.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Awaitable, Callable
from typing import Any

RESPONSE_FILE_VARIABLE = "BENCH_CEILING_RESPONSE"

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


def create_app() -> Callable[[dict[str, Any], Receive, Send], Awaitable[None]]:
    with open(os.environ[RESPONSE_FILE_VARIABLE], encoding="utf-8") as file:
        captured = json.load(file)
    status: int = captured["status"]
    headers = [(name.encode(), value.encode()) for name, value in captured["headers"]]
    body = base64.b64decode(captured["body"])
    start = {"type": "http.response.start", "status": status, "headers": headers}
    finish = {"type": "http.response.body", "body": body}

    async def app(scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return  # lifespan: nothing to set up
        while (await receive()).get("more_body"):
            pass
        await send(start)
        await send(finish)

    return app
