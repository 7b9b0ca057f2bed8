"""``GET /controllers/{sn}/events`` and ``GET /controllers/events`` (contract §11), as
Litestar routes: they document the streams in the OpenAPI document, and answer what the
streams' own lane (events/lane.py) hands over, the refusals above all, with the
problem+json of every route.
"""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Controller, Request, get
from litestar.di import NamedDependency
from litestar.params import HeaderParameter
from litestar.response import Stream

from devicecontrol.auth.middleware import SESSION_COOKIE
from devicecontrol.auth.schemas import Caller
from devicecontrol.auth.service import bearer_token_digest
from devicecontrol.auth.sessions import WebSession
from devicecontrol.controllers.schemas import SerialNumber
from devicecontrol.events.hub import Hub
from devicecontrol.events.opening import (
    EVENT_STREAM,
    HEADERS,
    BearerCredential,
    Credential,
    SessionCredential,
    event_stream,
    open_stream,
    position_of,
)
from devicecontrol.http.openapi import BEARER, ApiOperation, problems
from devicecontrol.runtime import Runtime

NO_COMPRESSION = "no_compression"  # the handlers' opt: gzip would hold events back

LastEventId = Annotated[
    str | None,
    HeaderParameter(
        name="Last-Event-ID",
        description="Resume after this event: the events that followed it are sent first.",
        required=False,
    ),
]


class EventsController(Controller):
    """Live events of the caller's controllers, as Server-Sent Events."""

    path = "/controllers"
    tags = ["events"]  # noqa: RUF012
    security = BEARER

    @get(
        "/events",
        media_type=EVENT_STREAM,
        summary="Live events of every controller of the caller's",
        operation_class=ApiOperation,
        responses=problems(401, 429, 503),
        opt={NO_COMPRESSION: True, SESSION_COOKIE: True},
    )
    async def all_events(
        self,
        request: Request[Caller, Any, Any],
        runtime: NamedDependency[Runtime],
        last_event_id: LastEventId = None,
    ) -> Stream:
        return await _answer(request, runtime, None, last_event_id)

    @get(
        "/{serial_number:str}/events",
        media_type=EVENT_STREAM,
        summary="Live events of one controller of the caller's",
        operation_class=ApiOperation,
        responses=problems(401, 404, 429, 503),
        opt={NO_COMPRESSION: True, SESSION_COOKIE: True},
    )
    async def controller_events(
        self,
        request: Request[Caller, Any, Any],
        runtime: NamedDependency[Runtime],
        serial_number: SerialNumber,
        last_event_id: LastEventId = None,
    ) -> Stream:
        return await _answer(request, runtime, serial_number, last_event_id)


async def _answer(
    request: Request[Caller, Any, Any],
    runtime: Runtime,
    serial_number: str | None,
    last_event_id: str | None,
) -> Stream:
    # what the middleware let in: the web app's session (its cookie), or the bearer token
    # (one header: two are a 401 there)
    credential: Credential
    if isinstance(request.auth, WebSession):
        credential = SessionCredential(request.auth.secret)
    else:
        credential = BearerCredential(bearer_token_digest(request.headers.get("authorization")))
    hub: Hub = request.app.state.event_hub
    async with hub.opening:
        opened = await open_stream(
            runtime, request.user.user_id, credential, serial_number, position_of(last_event_id)
        )
    headers = {name.decode(): value.decode() for name, value in HEADERS if name != b"content-type"}
    return Stream(event_stream(runtime, hub, opened), media_type=EVENT_STREAM, headers=headers)
