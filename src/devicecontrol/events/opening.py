"""Opening a stream (contract §11) and what it then sends, whichever lane serves it.

Everything that can refuse a stream (401, 404, 429) is decided in ``open_stream``, before
the response starts; the rest (a resume's replay, the opening ``online`` events) is the
stream's first part, in ``event_stream``.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from devicecontrol.auth.repository import find_live_access_token
from devicecontrol.auth.service import unknown_token
from devicecontrol.auth.sessions import find_session
from devicecontrol.clock import monotonic, utcnow
from devicecontrol.controllers.identity import is_serial_number
from devicecontrol.devices.commands.service import not_yours
from devicecontrol.events import repository, slots
from devicecontrol.events.hub import Hub, catch_up, owned_before
from devicecontrol.events.stream import Ended, Stream
from devicecontrol.observability.metrics import EVENT_STREAMS_CLOSED, EVENTS_SENT
from devicecontrol.runtime import Runtime

KEEP_ALIVE_S = 15.0  # a comment line at least this often
CHECK_TOKEN_S = 10.0  # a revoked token ends its streams within this
EVENT_STREAM = "text/event-stream"
KEEP_ALIVE = b": keep-alive\n\n"
# what every stream's response carries: never cached, never buffered by a proxy
HEADERS = (
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-store"),
    (b"x-accel-buffering", b"no"),
)


class Credential(Protocol):
    """What keeps a stream open: until when it holds, checked again while it runs (a
    bearer token, or the web app's session, which a browser's EventSource sends as a
    cookie)."""

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


class SessionCredential:
    """The web app's session, as a browser's EventSource sends it (its cookie)."""

    def __init__(self, secret: str) -> None:
        self.secret = secret

    async def expires_at(self, runtime: Runtime) -> datetime | None:
        session = await find_session(runtime, self.secret)
        return None if session is None else session.expires_at


def position_of(last_event_id: str | None) -> int | None:
    """The position a ``Last-Event-ID`` names (an opening event's ``id`` is one too);
    None when there is none or it is not ours."""
    if last_event_id is None:
        return None
    text = last_event_id.strip()
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 18 else None


@dataclass(slots=True)
class Opened:
    """A stream that may start: what it follows, from which position, until when."""

    stream: Stream
    slot: int
    credential: Credential
    expires_at: datetime
    position: int
    # each controller's (serial number, online) at ``position``; emptied once sent
    state: dict[int, tuple[str, bool]]
    resume_after: int | None


async def open_stream(
    runtime: Runtime,
    user_id: int,
    credential: Credential,
    serial_number: str | None,
    resume_after: int | None,
    *,
    expires_at: datetime | None = None,
) -> Opened:
    """The stream of ``user_id`` (one controller's, or all of theirs), or the domain error
    that refuses it: 401 (a token revoked since the caller was let in), 404, 429.
    ``expires_at``: the credential's, when the caller has just read it."""
    if serial_number is not None and not is_serial_number(serial_number):
        raise not_yours(serial_number)
    if expires_at is None:
        expires_at = await credential.expires_at(runtime)
    if expires_at is None:
        raise unknown_token()
    async with runtime.database.read() as connection:
        position, owned = await repository.position_and_controllers(
            connection, user_id, serial_number
        )
    if serial_number is not None and not owned:
        raise not_yours(serial_number)
    slot = await slots.take(runtime, user_id)
    stream = Stream(user_id, {row.id for row in owned}, one_controller=serial_number is not None)
    state = {row.id: (row.serial_number, bool(row.online)) for row in owned}
    return Opened(stream, slot, credential, expires_at, position, state, resume_after)


def encoded(event_id: int, event: str, data: str) -> bytes:
    """One event on the wire (``data`` is one line: JSON as msgspec writes it)."""
    return f"id: {event_id}\nevent: {event}\ndata: {data}\n\n".encode()


async def event_stream(runtime: Runtime, hub: Hub, opened: Opened) -> AsyncGenerator[bytes, None]:
    """The stream: a resume's replay, the opening ``online`` events, then what happens,
    with a keep-alive comment when quiet; it ends when the stream does."""
    stream, expires_at = opened.stream, opened.expires_at
    joined = False
    try:
        await _open(runtime, stream, opened.position, opened.state, opened.resume_after)
        opened.state = {}  # sent: not held for the stream's life
        await hub.join(stream, opened.position, opened.slot)
        joined = True
        keep_alive_at = monotonic() + KEEP_ALIVE_S
        check_at = monotonic() + CHECK_TOKEN_S
        while True:
            expires_in = (expires_at - utcnow()).total_seconds()
            soonest = min(keep_alive_at, check_at, monotonic() + expires_in)
            sent = await stream.next_events(max(0.0, soonest - monotonic()))
            if sent:
                for outgoing in sent:
                    EVENTS_SENT.labels(outgoing.event).inc()
                chunk = b"".join(encoded(o.id, o.event, o.data) for o in sent)
                sent = []  # held no longer than it takes to send
                yield chunk
                chunk = b""
                keep_alive_at = monotonic() + KEEP_ALIVE_S
            if stream.ended is not None:
                return
            if expires_at <= utcnow():
                stream.end(Ended.TOKEN_EXPIRED)
                continue
            if monotonic() >= check_at:
                check_at = monotonic() + CHECK_TOKEN_S
                still = await opened.credential.expires_at(runtime)
                if still is None:
                    stream.end(Ended.TOKEN_REVOKED)
                    continue
                expires_at = still
            if monotonic() >= keep_alive_at:  # quiet: a comment, which clients ignore
                keep_alive_at = monotonic() + KEEP_ALIVE_S
                yield KEEP_ALIVE
    finally:
        EVENT_STREAMS_CLOSED.labels(stream.ended or Ended.CLIENT).inc()
        if joined:
            hub.leave(stream)
        else:
            hub.give_back(opened.slot)  # it never joined


async def _open(
    runtime: Runtime,
    stream: Stream,
    position: int,
    state: dict[int, tuple[str, bool]],
    resume_after: int | None,
) -> None:
    """What a stream opens with: on a resume, what the client missed up to ``position``
    (or ``gap`` when it is no longer kept); then each controller's ``online``."""
    if resume_after is not None:
        async with runtime.database.read() as connection:
            oldest = await repository.oldest_position(connection)
        kept = oldest is not None and oldest - 1 <= resume_after <= position
        if kept or resume_after == position:
            owned_now = set(stream.controllers)
            before = await owned_before(runtime, stream.user_id, owned_now, resume_after, position)
            if stream.one_controller:  # only its own controller, if it was theirs then
                before &= owned_now
                stream.replaying_for = next(iter(owned_now))
            stream.controllers = before
            await catch_up(runtime, stream, resume_after, position)
            stream.controllers = owned_now
            stream.replaying_for = None
        else:
            stream.gap(position)
    stream.opening(position, state)
