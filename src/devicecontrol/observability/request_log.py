"""Every request gets an id, one log line and its request metrics.

``RequestObserver`` wraps Litestar's whole ASGI handler (app.py), outside routing, so that
404s and 405s are seen too. When the answer is done it reads what routing and
authentication left in the scope: the route template (never the raw path, whose serial
numbers would make every time series and log search unique) and the caller.

The request id is the client's ``X-Request-ID`` when that is sane (``SANE_REQUEST_ID``),
else a new one; either way the response carries it back in ``X-Request-ID``. This runs on
every request, so it avoids what it can: no Request object, one closure, one dict for the
line and only when the level is on, metric children looked up once (metrics.py).
"""

from __future__ import annotations

import logging
import random
import re
from collections.abc import Awaitable, Sequence
from time import perf_counter

from litestar.types import ASGIApp, Message, Receive, Scope, Send

from devicecontrol.config import IPNetwork
from devicecontrol.http.addresses import scope_client_address
from devicecontrol.observability.logs import REQUEST_ID, emit
from devicecontrol.observability.metrics import REQUEST_METRICS

REQUEST_ID_HEADER = b"x-request-id"
# an incoming id is kept only when it is this: no spaces, quotes or control characters, so
# it cannot forge a line or a field of the log, and short enough to go on every line
REQUEST_ID_PATTERN = "^[A-Za-z0-9._:+/=-]{1,128}$"  # also in the OpenAPI document
SANE_REQUEST_ID = re.compile(REQUEST_ID_PATTERN.encode())
# the route of a request that matched none (unknown path, or a method the path lacks)
UNMATCHED_ROUTE = "<unmatched>"
# the longest unmatched path a line carries; a longer one is cut and ends in "..."
MAX_LOGGED_PATH = 256
# any other method token is counted and logged as OTHER: it must not add time series
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
# probes and scrapes arrive every few seconds: their lines are debug, not info
QUIET_ROUTES = frozenset({"/healthz", "/readyz", "/metrics"})

access_log = logging.getLogger("devicecontrol.access")


def new_request_id() -> str:
    """128 random bits in hex; ``random`` is enough for an id that is no secret, and cheap."""
    return f"{random.getrandbits(128):032x}"


def unmatched_path(scope: Scope) -> str:
    """What a client asked for that no route has, as sent (percent-encoded), for the log.

    Never the query string: it may carry credentials. Cut to ``MAX_LOGGED_PATH`` so that
    a hostile path cannot make lines huge.
    """
    raw = scope.get("raw_path") or scope["path"].encode("utf-8", "replace")
    path = raw.split(b"?", 1)[0].decode("ascii", "backslashreplace")
    return path if len(path) <= MAX_LOGGED_PATH else path[: MAX_LOGGED_PATH - 3] + "..."


def incoming_request_id(headers: Sequence[tuple[bytes, bytes]]) -> bytes | None:
    """The first ``X-Request-ID`` if it is sane, else None (a new id is made)."""
    for name, value in headers:
        if name == REQUEST_ID_HEADER:
            return value if SANE_REQUEST_ID.fullmatch(value) else None
    return None


class RequestObserver:
    """The ASGI wrapper: request id in and out, then the request's line and metrics."""

    def __init__(self, app: ASGIApp, trusted_proxies: Sequence[IPNetwork]) -> None:
        self.app = app
        self.trusted_proxies = trusted_proxies

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = perf_counter()
        raw_id = incoming_request_id(list(scope["headers"]))
        if raw_id is None:
            request_id = new_request_id()
            raw_id = request_id.encode()
        else:
            request_id = raw_id.decode("ascii")
        id_header = (REQUEST_ID_HEADER, raw_id)
        status = 500  # if no answer starts, the server's own error answer is a 500

        def send_with_id(message: Message) -> Awaitable[None]:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message["headers"] = [*message.get("headers", ()), id_header]
            return send(message)

        token = REQUEST_ID.set(request_id)
        try:
            await self.app(scope, receive, send_with_id)
        finally:
            self._finish(scope, request_id, status, perf_counter() - started)
            REQUEST_ID.reset(token)

    def _finish(self, scope: Scope, request_id: str, status: int, seconds: float) -> None:
        route = scope.get("path_template") or UNMATCHED_ROUTE
        method = scope.get("method", "OTHER")
        if method not in METHODS:
            method = "OTHER"
        REQUEST_METRICS.observe(route, method, status, seconds)
        if status >= 500:
            level = logging.ERROR
        elif route in QUIET_ROUTES:
            level = logging.DEBUG
        else:
            level = logging.INFO
        if not access_log.isEnabledFor(level):
            return
        user = scope.get("user")
        line = {
            "event": "request",
            "request_id": request_id,
            "method": method,
            "route": route,
            "status": status,
            "duration_ms": round(seconds * 1000, 3),
            "user_id": getattr(user, "user_id", None),
            "client": scope_client_address(scope, self.trusted_proxies),
        }
        if route is UNMATCHED_ROUTE:
            # what clients call that the service lacks; the metrics keep the one route label
            line["path"] = unmatched_path(scope)
            if method == "OTHER":
                line["unknown_method"] = str(scope.get("method", ""))[:16]
        emit(access_log, level, line)
