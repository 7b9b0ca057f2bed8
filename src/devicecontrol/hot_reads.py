"""The hot reads answered without the framework's per-request machinery.

Phone apps and integrations poll four reads all day: ``GET /controllers/{sn}``,
``GET /controllers``, ``GET /users/me`` and ``POST /provider/fetch`` (with and without
``/v1``). Litestar's routing, middleware, dependency injection and response building cost
several times the work of such a read (docs/PERFORMANCE.md). ``HotReads`` sits between
the request observer and Litestar and answers a well-formed hot read itself, by calling
the same functions the Litestar handlers call: the token check
(``auth.service.authenticate_bearer``), the services, and the HAL builders
(``controller_document``, ``controller_page``, ``profile_response``,
``provider_fetch_response``). The controller read runs the token check inside its own
statement (``controllers.service.controller_detail_as_bearer``): one round trip.

It only ever sends a *success*. Whatever it does not take as it is (another route or
method, a percent-encoded path or query, a repeated parameter or header, a body over the
limit) and every error a read raises (a
bad token, someone else's controller, a bad page number, a database outage) goes to
Litestar untouched, body included, which then gives the answer it always gave through
the one error mapping (``http/problems.py``). A client that accepts gzip gets its answer through
Litestar's own compression (the middleware's send wrapper). So there is one place for each
rule and one for each error, and the request log and metrics (``RequestObserver``, outside
both) see the same route template and caller either way. tests/test_hot_reads.py checks that both
lanes give the same bytes and headers for the same requests.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import msgspec
from litestar.config.compression import CompressionConfig
from litestar.middleware.compression import CompressionMiddleware
from litestar.types import ASGIApp, Receive, ReceiveMessage, Scope, Send
from litestar.types.asgi_types import HTTPResponseBodyEvent, HTTPResponseStartEvent

from devicecontrol.auth.schemas import Caller
from devicecontrol.auth.service import authenticate_bearer
from devicecontrol.controllers.identity import is_serial_number
from devicecontrol.controllers.routes import controller_document, controller_page
from devicecontrol.controllers.service import controller_detail_as_bearer
from devicecontrol.devices.routes import provider_fetch_response
from devicecontrol.errors import DomainError
from devicecontrol.http.bodies import body_object
from devicecontrol.http.hal import HAL_JSON
from devicecontrol.runtime import Runtime
from devicecontrol.users.routes import profile_response

# the caller and the document, from the Authorization header and the request
HotAnswer = Callable[[Runtime, str | None, "HotRequest"], Awaitable[tuple[Caller, msgspec.Struct]]]
# the list's query parameters; any other is ignored, as Litestar ignores it
LIST_PARAMETERS = frozenset({b"type", b"mac", b"page", b"page_size"})
# the longest filter value Litestar's QueryParameter(max_length=64) lets through
MAX_FILTER_LENGTH = 64
EVENTS = "events"  # /controllers/events is the streams' route (events/routes.py), not a serial
CONTENT_TYPE = (b"content-type", HAL_JSON.encode())
logger = logging.getLogger("devicecontrol.hot_reads")


class NotHot(Exception):
    """The request is not one this lane takes as it is: Litestar answers it."""


@dataclass(frozen=True, slots=True)
class HotRequest:
    """What the answers need of a request: its path argument, headers and body."""

    argument: str  # the serial number of /controllers/{sn}; "" elsewhere
    headers: dict[bytes, bytes]  # each header sent once, lower-case names
    query: bytes
    body: bytes


@dataclass(frozen=True, slots=True)
class HotRoute:
    method: str
    template: str  # Litestar's path template, for the request log and metrics
    answer: HotAnswer


async def _controller(
    runtime: Runtime, authorization: str | None, request: HotRequest
) -> tuple[Caller, msgspec.Struct]:
    caller, detail = await controller_detail_as_bearer(runtime, authorization, request.argument)
    return caller, controller_document(detail, request.argument)


def _list_parameters(query: bytes) -> dict[str, str]:
    """The list's parameters when the query is plain (no escapes, each at most once)."""
    parameters: dict[str, str] = {}
    if not query:
        return parameters
    if b"%" in query or b"+" in query or not query.isascii():
        raise NotHot
    for pair in query.split(b"&"):
        name, equals, value = pair.partition(b"=")
        if name not in LIST_PARAMETERS:
            continue
        key = name.decode()
        if not equals or not value or key in parameters or len(value) > MAX_FILTER_LENGTH:
            raise NotHot
        parameters[key] = value.decode()
    return parameters


async def _controllers(
    runtime: Runtime, authorization: str | None, request: HotRequest
) -> tuple[Caller, msgspec.Struct]:
    given = _list_parameters(request.query)  # before the token: NotHot costs no query
    caller = await authenticate_bearer(runtime, authorization)
    return caller, await controller_page(
        runtime,
        caller.user_id,
        type_=given.get("type"),
        mac=given.get("mac"),
        page=given.get("page"),
        page_size=given.get("page_size"),
    )


async def _profile(
    runtime: Runtime, authorization: str | None, request: HotRequest
) -> tuple[Caller, msgspec.Struct]:
    caller = await authenticate_bearer(runtime, authorization)
    accept_response = request.headers.get(b"accept-response")
    text = accept_response.decode("latin-1") if accept_response is not None else None
    return caller, await profile_response(runtime, caller.user_id, text)


async def _fetch(
    runtime: Runtime, authorization: str | None, request: HotRequest
) -> tuple[Caller, msgspec.Struct]:
    caller = await authenticate_bearer(runtime, authorization)
    content_type = request.headers.get(b"content-type")
    content_types = [] if content_type is None else [content_type.decode("latin-1")]
    body = body_object(request.body, content_types)
    return caller, await provider_fetch_response(runtime, caller.user_id, body)


def hot_routes() -> dict[str, HotRoute]:
    """Paths (both prefixes) to their route; ``/controllers/{sn}`` is matched apart."""
    routes = {}
    for prefix in ("/v1", ""):
        routes[f"{prefix}/controllers"] = HotRoute("GET", f"{prefix}/controllers", _controllers)
        routes[f"{prefix}/users/me"] = HotRoute("GET", f"{prefix}/users/me", _profile)
        routes[f"{prefix}/provider/fetch"] = HotRoute("POST", f"{prefix}/provider/fetch", _fetch)
    return routes


CONTROLLER_ROUTES = {
    prefix: HotRoute("GET", f"{prefix}/controllers/{{serial_number}}", _controller)
    for prefix in ("/v1", "")
}


def _replay(body: bytes, more: bool, receive: Receive) -> Receive:
    """``receive`` for Litestar after this lane read (part of) the body: that part first."""
    sent = False

    async def replayed() -> ReceiveMessage:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": more}
        return await receive()

    return replayed


class HotReads:
    """ASGI: a successful hot read answered here; anything else passed to ``app``."""

    def __init__(
        self,
        app: ASGIApp,
        runtime: Runtime,
        *,
        max_body_bytes: int,
        compression: CompressionConfig,
    ) -> None:
        self.app = app
        self.runtime = runtime
        self.max_body_bytes = max_body_bytes
        self.routes = hot_routes()
        # the app's own compression, for the answers sent here
        self.compression = CompressionMiddleware(app, compression)
        self.encoding = compression.compression_facade.encoding.encode()

    def _route(self, scope: Scope) -> tuple[HotRoute, str] | None:
        path: str = scope["path"]
        route = self.routes.get(path)
        argument = ""
        if route is None:
            prefix, separator, serial_number = path.rpartition("/controllers/")
            if not separator or prefix not in CONTROLLER_ROUTES:
                return None
            if not is_serial_number(serial_number) or serial_number == EVENTS:
                return None  # the 404 is Litestar's (and a "/" in it is another route)
            route, argument = CONTROLLER_ROUTES[prefix], serial_number
        if route.method != scope.get("method") or b"%" in (scope.get("raw_path") or b"%"):
            return None
        return route, argument

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        matched = self._route(scope) if scope["type"] == "http" else None
        if matched is None:
            await self.app(scope, receive, send)
            return
        route, argument = matched
        body, more = b"", False
        if route.method == "POST":
            body, more = await self._read_body(receive)
        answer = None if more else await self._answer(scope, route, argument, body)
        if answer is None:
            # what this lane read of the body, Litestar reads again (an empty body too: the
            # request's one http.request message is gone from ``receive``)
            read = route.method == "POST"
            await self.app(scope, _replay(body, more, receive) if read else receive, send)
            return
        caller, encoded, accept_encoding = answer
        scope["path_template"] = route.template
        scope["user"] = caller
        if self.encoding in accept_encoding:  # as the middleware decides it
            send = self.compression.create_compression_send_wrapper(
                send=send, compression_encoding=self.encoding.decode(), scope=scope
            )
        headers: list[tuple[bytes, bytes]] = [
            CONTENT_TYPE,
            (b"content-length", str(len(encoded)).encode()),
        ]
        start: HTTPResponseStartEvent = {
            "type": "http.response.start",
            "status": 200,
            "headers": headers,
        }
        await send(start)
        answer_body: HTTPResponseBodyEvent = {
            "type": "http.response.body",
            "body": encoded,
            "more_body": False,
        }
        await send(answer_body)

    async def _read_body(self, receive: Receive) -> tuple[bytes, bool]:
        """The body, and whether more is left (past the limit: Litestar's 413 answers it)."""
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return b"".join(chunks), True  # a disconnect: Litestar sees it too
            chunk = message.get("body", b"")
            chunks.append(chunk)
            size += len(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks), False
            if size > self.max_body_bytes:
                return b"".join(chunks), True

    async def _answer(
        self, scope: Scope, route: HotRoute, argument: str, body: bytes
    ) -> tuple[Caller, bytes, bytes] | None:
        """The caller, the encoded body and the Accept-Encoding header, or None when
        Litestar is to answer."""
        headers: dict[bytes, bytes] = {}
        authorization = []
        for name, value in scope["headers"]:
            if name == b"authorization":
                authorization.append(value)
            elif name in headers:
                return None  # a repeated header: whatever Litestar makes of it
            else:
                headers[name] = value
        # as BearerTokenMiddleware reads it: several Authorization headers joined
        bearer = b", ".join(authorization).decode("latin-1") or None
        request = HotRequest(argument, headers, scope.get("query_string", b""), body)
        try:
            caller, document = await route.answer(self.runtime, bearer, request)
        except (NotHot, DomainError):
            return None
        except Exception:
            # a database outage or a bug: Litestar runs the read again and answers (503,
            # or 500 with the traceback in the log); this lane notes that it gave way
            logger.debug("hot read handed to the framework", exc_info=True)
            return None
        return caller, msgspec.json.encode(document), headers.get(b"accept-encoding", b"")
