"""Streams read as a client reads them: an HTTP connection to a real ``serve``, its body
parsed line by line into Server-Sent Events (comments kept apart)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import msgspec

READ_S = 5.0  # an event promised "within 1 s" has this long in a loaded test run
_names = itertools.count(1)


def unique(prefix: str) -> str:
    """A name no other test of the shared server uses."""
    return f"{prefix}{next(_names)}"


@dataclass
class Event:
    id: str | None
    event: str
    data: dict[str, Any]


@dataclass
class Reader:
    """One open stream."""

    response: httpx.Response
    comments: list[str] = field(default_factory=list)
    _lines: AsyncIterator[str] | None = None

    async def next(self, within: float = READ_S) -> Event:
        """The next event (comments are noted and skipped); TimeoutError after ``within``."""
        return await asyncio.wait_for(self._next(), within)

    async def _next(self) -> Event:
        if self._lines is None:
            self._lines = self.response.aiter_lines()
        fields: dict[str, str] = {}
        async for line in self._lines:
            if line == "":
                if fields:
                    return Event(
                        fields.get("id"),
                        fields.get("event", "message"),
                        msgspec.json.decode(fields.get("data", "null")),
                    )
                continue
            if line.startswith(":"):
                self.comments.append(line[1:].strip())
                continue
            name, _, value = line.partition(":")
            fields[name] = value[1:] if value.startswith(" ") else value
        raise EOFError("the stream ended")

    async def until(self, kind: str, within: float = READ_S, **data: Any) -> Event:
        """Skip events up to the first of ``kind`` whose data holds ``data``."""

        async def find() -> Event:
            while True:
                event = await self._next()
                if event.event == kind and all(event.data.get(k) == v for k, v in data.items()):
                    return event

        return await asyncio.wait_for(find(), within)

    async def ended(self, within: float = READ_S) -> list[Event]:
        """The events up to the end of the stream (which must end within ``within``)."""
        seen: list[Event] = []

        async def rest() -> None:
            with contextlib.suppress(EOFError):
                while True:
                    seen.append(await self._next())

        await asyncio.wait_for(rest(), within)
        return seen


@contextlib.asynccontextmanager
async def stream(
    base_url: str, path: str, token: str | None, *, last_event_id: str | None = None
) -> AsyncIterator[Reader]:
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    if last_event_id is not None:
        headers["Last-Event-ID"] = last_event_id
    timeout = httpx.Timeout(10, read=60)
    async with (
        httpx.AsyncClient(base_url=base_url, timeout=timeout) as http,
        http.stream("GET", path, headers=headers) as response,
    ):
        yield Reader(response)
