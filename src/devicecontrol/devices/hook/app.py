"""The hook's ASGI app: the EMQX, VerneMQ and RabbitMQ questions, answered only to the
broker that presents the hook's token, as ``Authorization: Bearer <token>`` or as the first
segment of the path (RabbitMQ's HTTP backend and VerneMQ's webhooks send no headers of
their own). Anything else is 401; a body that is not the question's JSON is 400, never 500.
Errors are problem+json, as on the public API.

No request is logged: a path may carry the token, and the questions carry passwords.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Any, cast

import msgspec
from litestar import Litestar, Request, Response
from litestar.di import Provide
from litestar.enums import ScopeType
from litestar.types import (
    ASGIApp,
    HTTPResponseBodyEvent,
    HTTPResponseStartEvent,
    Receive,
    Scope,
    Send,
)

from devicecontrol.devices.hook.emqx import EMQX_HANDLERS
from devicecontrol.devices.hook.rabbitmq import RABBITMQ_HANDLERS
from devicecontrol.devices.hook.vernemq import VERNEMQ_HANDLERS
from devicecontrol.http.problems import EXCEPTION_HANDLERS, problem_response
from devicecontrol.runtime import Runtime

BEARER = b"bearer "
_REFUSED = msgspec.json.encode(
    {
        "type": "about:blank",
        "title": "Unauthorized",
        "status": 401,
        "detail": "The broker hook answers its broker only: present its token.",
    }
)


def _digest(value: bytes) -> bytes:
    return hashlib.sha256(value).digest()


class BrokerToken:
    """Lets through a request that presents the token, with the token taken off its path."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self._token = _digest(token.encode())

    def _presents(self, presented: bytes) -> bool:
        return hmac.compare_digest(_digest(presented), self._token)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP:
            await self.app(scope, receive, send)
            return
        first, slash, rest = scope["path"][1:].partition("/")
        if slash and self._presents(first.encode()):
            path = "/" + rest
            scope = cast(Scope, {**scope, "path": path, "raw_path": path.encode()})
        elif not self._presents(_bearer(scope)):
            await _refuse(send)
            return
        await self.app(scope, receive, send)


def _bearer(scope: Scope) -> bytes:
    for name, value in scope["headers"]:
        if name == b"authorization" and value[: len(BEARER)].lower() == BEARER:
            return value[len(BEARER) :].strip()
    return b""


async def _refuse(send: Send) -> None:
    headers = [
        (b"content-type", b"application/problem+json"),
        (b"www-authenticate", b"Bearer"),
        (b"content-length", str(len(_REFUSED)).encode()),
    ]
    start: HTTPResponseStartEvent = {
        "type": "http.response.start",
        "status": 401,
        "headers": headers,
    }
    body: HTTPResponseBodyEvent = {
        "type": "http.response.body",
        "body": _REFUSED,
        "more_body": False,
    }
    await send(start)
    await send(body)


def _nested_too_deeply(_: Request[Any, Any, Any], __: RecursionError) -> Response[bytes]:
    """msgspec gives up on a body at the interpreter's recursion limit, even in a member the
    question does not read: the one deep recursion a request can cause here."""
    return problem_response(400, "The request body is nested too deeply.")


def create_hook_app(runtime: Runtime, token: str) -> Litestar:
    async def provide_runtime() -> Runtime:
        return runtime

    app = Litestar(
        route_handlers=[*EMQX_HANDLERS, *VERNEMQ_HANDLERS, *RABBITMQ_HANDLERS],
        dependencies={"runtime": Provide(provide_runtime, use_cache=True)},
        exception_handlers={**EXCEPTION_HANDLERS, RecursionError: _nested_too_deeply},
        openapi_config=None,
        logging_config=None,
        debug=False,
    )
    app.asgi_handler = BrokerToken(app.asgi_handler, token)
    return app
