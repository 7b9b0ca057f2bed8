"""The streams' own lane: ``GET .../controllers/events`` and ``.../controllers/{sn}/events``
served in plain ASGI, in front of Litestar.

Why: a stream is opened once and then held for minutes, and what it costs while it is held
bounds how many a worker can hold. Through Litestar an idle stream holds its request,
its middleware frames, a task group of two tasks and the response's iterator wrappers;
here it holds the generator of ``opening.event_stream`` and one task that waits for the
client to go. The checks are the same functions Litestar's route calls (the token as the
middleware checks it, ``opening.open_stream``); the web app's session cookie, which a
browser's EventSource sends instead of a token, is checked here alone. Anything this lane
does not open (a refusal, an odd request) it hands to Litestar, whose route runs the checks
again and answers with its problem+json, as the hot lane does for the polled reads (a
session's refusal is then a 401: Litestar's routes take bearer tokens only).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from datetime import datetime
from typing import Any

from litestar.connection import ASGIConnection
from litestar.enums import ScopeType
from litestar.types import ASGIApp, Receive, Scope, Send

from devicecontrol.auth.repository import find_live_access_token
from devicecontrol.auth.schemas import Caller
from devicecontrol.auth.service import bearer_token_digest
from devicecontrol.auth.sessions import find_session, session_secret
from devicecontrol.clock import utcnow
from devicecontrol.events.hub import Hub
from devicecontrol.events.opening import (
    HEADERS,
    BearerCredential,
    Credential,
    Opened,
    SessionCredential,
    event_stream,
    open_stream,
    position_of,
)
from devicecontrol.events.stream import Ended
from devicecontrol.runtime import Runtime

PATH = re.compile(r"(?P<prefix>/v1)?/controllers/(?:(?P<serial>[A-Za-z0-9_-]{1,64})/)?events")


class StreamLane:
    def __init__(self, app: ASGIApp, runtime: Runtime, hub: Hub) -> None:
        self.app = app
        self.runtime = runtime
        self.hub = hub

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        matched = None
        if scope["type"] == ScopeType.HTTP and scope.get("method") == "GET":
            matched = PATH.fullmatch(scope["path"])
        if matched is None or b"%" in (scope.get("raw_path") or b"%"):
            await self.app(scope, receive, send)
            return
        opened = await self._open(scope, matched)
        if opened is None:
            await self.app(scope, receive, send)  # Litestar answers, refusals included
            return
        serial = matched["serial"]
        prefix = matched["prefix"] or ""
        template = f"{prefix}/controllers/{{serial_number}}/events" if serial else scope["path"]
        scope["path_template"] = template  # for the request log and the metrics
        await self._stream(opened, receive, send)

    async def _open(self, scope: Scope, matched: re.Match[str]) -> Opened | None:
        authorization: list[bytes] = []
        last_event_id: list[bytes] = []
        for name, value in scope["headers"]:
            if name == b"authorization":
                authorization.append(value)
            elif name == b"last-event-id":
                last_event_id.append(value)
        if len(authorization) > 1 or len(last_event_id) > 1:
            return None
        try:
            resume = position_of(last_event_id[0].decode("latin-1")) if last_event_id else None
            async with self.hub.opening:
                # the credential as the middleware (or the web app) checks it, with its
                # expiry, in one read
                found = await self._credential(scope, authorization)
                if found is None:
                    return None
                credential, user_id, expires_at = found
                opened = await open_stream(
                    self.runtime,
                    user_id,
                    credential,
                    matched["serial"],
                    resume,
                    expires_at=expires_at,
                )
        except Exception:  # a refusal, an outage: Litestar's route decides and says it
            return None
        scope["user"] = Caller(user_id=user_id)
        return opened

    async def _credential(
        self, scope: Scope, authorization: list[bytes]
    ) -> tuple[Credential, int, datetime] | None:
        """A bearer token, else (a browser's EventSource) the web app's session cookie."""
        if authorization:
            bearer = BearerCredential(bearer_token_digest(authorization[0].decode("latin-1")))
            async with self.runtime.database.read() as connection:
                live = await find_live_access_token(connection, bearer.token_digest, utcnow())
            return None if live is None else (bearer, live.user_id, live.expires_at)
        session = await find_session(
            self.runtime, session_secret(ASGIConnection(scope), self.runtime)
        )
        if session is None:
            return None
        return SessionCredential(session.secret), session.user_id, session.expires_at

    async def _stream(self, opened: Opened, receive: Receive, send: Send) -> None:
        """Send the stream. A reader that falls MAX_WAITING events behind is not waited
        for: its ``send``, blocked on a full socket, is cancelled, and the connection
        closes unfinished (uvicorn logs that it did), its memory freed at once."""
        start: Any = {"type": "http.response.start", "status": 200, "headers": list(HEADERS)}
        gone = asyncio.create_task(_client_gone(receive, opened))
        this = asyncio.current_task()
        assert this is not None
        opened.stream.on_overflow = this.cancel
        messages = event_stream(self.runtime, self.hub, opened)
        try:
            await send(start)
            async for chunk in messages:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
                del chunk  # not held while the stream waits for its next events
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:  # the client went away mid-write
            opened.stream.end(Ended.CLIENT)
        except asyncio.CancelledError:
            if opened.stream.ended != Ended.SLOW_READER:
                raise
            this.uncancel()
        finally:
            opened.stream.on_overflow = None
            await messages.aclose()  # its stream leaves the hub now, not when collected
            gone.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await gone


async def _client_gone(receive: Receive, opened: Opened) -> None:
    """Ends the stream when the client disconnects (the request has no body to read)."""
    while (await receive())["type"] != "http.disconnect":
        pass
    opened.stream.end(Ended.CLIENT)
