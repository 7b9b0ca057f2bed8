"""``GET /controllers/{sn}/events`` and ``GET /controllers/events`` (contract §11).

Served by Litestar, not the hot lane: a stream is opened once and then lives for minutes,
so the framework's per-request cost does not count, while its authentication, problem+json
errors (decided before the first byte) and OpenAPI document are wanted as for any route.

Everything that can refuse a stream (401, 404, 429) happens before the response starts;
the rest (a resume's replay, the opening ``online`` events) is the stream's first part.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime
from typing import Annotated, Any, Protocol

from litestar import Controller, Request, get
from litestar.di import NamedDependency
from litestar.params import HeaderParameter
from litestar.response import ServerSentEvent, ServerSentEventMessage

from devicecontrol.auth.repository import find_live_access_token
from devicecontrol.auth.schemas import Caller
from devicecontrol.auth.service import bearer_token_digest, unknown_token
from devicecontrol.clock import monotonic, utcnow
from devicecontrol.controllers.identity import is_serial_number
from devicecontrol.controllers.schemas import SerialNumber
from devicecontrol.devices.commands.service import not_yours
from devicecontrol.events import repository, slots
from devicecontrol.events.hub import Hub, catch_up, owned_before
from devicecontrol.events.stream import Ended, Stream
from devicecontrol.http.openapi import BEARER, ApiOperation, problems
from devicecontrol.observability.metrics import EVENT_STREAMS_CLOSED, EVENTS_SENT
from devicecontrol.runtime import Runtime

KEEP_ALIVE_S = 15.0  # a comment line at least this often
CHECK_TOKEN_S = 10.0  # a revoked token ends its streams within this
EVENT_STREAM = "text/event-stream"
NO_COMPRESSION = "no_compression"  # the handlers' opt: gzip would hold events back

LastEventId = Annotated[
    str | None,
    HeaderParameter(
        name="Last-Event-ID",
        description="Resume after this event: the events that followed it are sent first.",
        required=False,
    ),
]


class Credential(Protocol):
    """What keeps a stream open: until when it holds, checked again while it runs (a
    bearer token today; the web app's session, which a browser's EventSource sends as a
    cookie, is a second kind)."""

    async def expires_at(self, runtime: Runtime) -> datetime | None:
        """When it expires; None once it no longer holds (revoked, account disabled)."""
        ...


class BearerCredential:
    def __init__(self, token_digest: str) -> None:
        self.token_digest = token_digest

    async def expires_at(self, runtime: Runtime) -> datetime | None:
        async with runtime.database.read() as connection:
            live = await find_live_access_token(connection, self.token_digest, utcnow())
        return None if live is None else live.expires_at


def _credential(request: Request[Caller, Any, Any]) -> BearerCredential:
    """The bearer token the middleware let in (one header: two are a 401 there)."""
    return BearerCredential(bearer_token_digest(request.headers.get("authorization")))


def _position(last_event_id: str | None) -> int | None:
    """The position a ``Last-Event-ID`` names (an opening event's ``id`` is one too);
    None when there is none or it is not ours."""
    if last_event_id is None:
        return None
    text = last_event_id.strip()
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 18 else None


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
        opt={NO_COMPRESSION: True},
    )
    async def all_events(
        self,
        request: Request[Caller, Any, Any],
        runtime: NamedDependency[Runtime],
        last_event_id: LastEventId = None,
    ) -> ServerSentEvent:
        return await open_stream(request, runtime, None, _position(last_event_id))

    @get(
        "/{serial_number:str}/events",
        media_type=EVENT_STREAM,
        summary="Live events of one controller of the caller's",
        operation_class=ApiOperation,
        responses=problems(401, 404, 429, 503),
        opt={NO_COMPRESSION: True},
    )
    async def controller_events(
        self,
        request: Request[Caller, Any, Any],
        runtime: NamedDependency[Runtime],
        serial_number: SerialNumber,
        last_event_id: LastEventId = None,
    ) -> ServerSentEvent:
        if not is_serial_number(serial_number):
            raise not_yours(serial_number)
        return await open_stream(request, runtime, serial_number, _position(last_event_id))


async def open_stream(
    request: Request[Caller, Any, Any],
    runtime: Runtime,
    serial_number: str | None,
    resume_after: int | None,
) -> ServerSentEvent:
    """Refuse now (404, 429, 401), or answer with the stream."""
    user_id = request.user.user_id
    credential = _credential(request)
    expires_at = await credential.expires_at(runtime)
    if expires_at is None:  # revoked since the middleware's (perhaps cached) check
        raise unknown_token()
    async with runtime.database.read() as connection:
        position, owned = await repository.position_and_controllers(
            connection, user_id, serial_number
        )
    if serial_number is not None and not owned:
        raise not_yours(serial_number)
    slot = await slots.take(runtime, user_id)
    stream = Stream(
        user_id,
        {row.id: row.serial_number for row in owned},
        one_controller=serial_number is not None,
    )
    online = {row.id: bool(row.online) for row in owned}
    hub: Hub = request.app.state.event_hub
    messages = _messages(
        runtime, hub, stream, slot, credential, expires_at, position, online, resume_after
    )
    return ServerSentEvent(messages, headers={"Cache-Control": "no-store"})


async def _messages(
    runtime: Runtime,
    hub: Hub,
    stream: Stream,
    slot: int,
    credential: Credential,
    expires_at: datetime,
    position: int,
    online: dict[int, bool],
    resume_after: int | None,
) -> AsyncIterator[ServerSentEventMessage]:
    """The stream: a resume's replay, the opening ``online`` events, then what happens."""
    joined = False
    try:
        await _open(runtime, stream, position, online, resume_after)
        await hub.join(stream, position, slot)
        joined = True
        keep_alive_at = check_at = monotonic()
        keep_alive_at += KEEP_ALIVE_S
        check_at += CHECK_TOKEN_S
        while True:
            expires_in = (expires_at - utcnow()).total_seconds()
            soonest = min(keep_alive_at, check_at, monotonic() + expires_in)
            sent = await stream.next_events(max(0.0, soonest - monotonic()))
            for outgoing in sent:
                EVENTS_SENT.labels(outgoing.event).inc()
                yield ServerSentEventMessage(
                    data=outgoing.data, event=outgoing.event, id=str(outgoing.id)
                )
            if sent:
                keep_alive_at = monotonic() + KEEP_ALIVE_S
            if stream.ended is not None:
                return
            if expires_at <= utcnow():
                stream.end(Ended.TOKEN_EXPIRED)
                continue
            if monotonic() >= check_at:
                check_at = monotonic() + CHECK_TOKEN_S
                still = await credential.expires_at(runtime)
                if still is None:
                    stream.end(Ended.TOKEN_REVOKED)
                    continue
                expires_at = still
            if monotonic() >= keep_alive_at:  # quiet: a comment, which clients ignore
                keep_alive_at = monotonic() + KEEP_ALIVE_S
                yield ServerSentEventMessage(comment="keep-alive", data=None)
    finally:
        EVENT_STREAMS_CLOSED.labels(stream.ended or Ended.CLIENT).inc()
        if joined:
            hub.leave(stream)
        else:
            hub.give_back(slot)  # it never joined


async def _open(
    runtime: Runtime,
    stream: Stream,
    position: int,
    online: dict[int, bool],
    resume_after: int | None,
) -> None:
    """What a stream opens with: on a resume, what the client missed up to ``position``
    (or ``gap`` when it is no longer kept); then each controller's ``online``."""
    if resume_after is not None:
        async with runtime.database.read() as connection:
            oldest = await repository.oldest_position(connection)
        kept = oldest is not None and oldest - 1 <= resume_after <= position
        if kept or resume_after == position:
            owned_now = dict(stream.controllers)
            before = await owned_before(runtime, stream.user_id, owned_now, resume_after, position)
            if stream.one_controller:  # only its own controller, if it was theirs then
                before = {cid: sn for cid, sn in before.items() if cid in owned_now}
            stream.controllers = before
            await catch_up(runtime, stream, resume_after, position)
            stream.controllers = owned_now
        else:
            stream.gap(position)
    stream.opening(position, online)
