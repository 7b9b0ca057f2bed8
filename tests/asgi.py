"""The app on the test's own event loop, spoken to with httpx over ASGI.

Litestar's AsyncTestClient hands each request to a blocking portal and waits for it, so
``asyncio.gather`` over it runs requests one after another, and the app's connections live
on another loop. Here the requests really overlap, the test may hold the app's connections
(its ``Runtime``), and the socket peer the app sees is the test's choice.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx

from devicecontrol.config import Settings
from devicecontrol.runtime import Runtime
from tests.apps import lent_app

PEER_PORT = 40000


@asynccontextmanager
async def app_and_client(
    settings: Settings, *, peer: str | None = None
) -> AsyncIterator[tuple[Runtime, httpx.AsyncClient]]:
    """A new app on ``settings`` and a client of it, seen from ``peer`` (httpx's default
    address when none is named); the app's runtime, closed when the block ends."""
    with lent_app(settings) as app:
        if peer is None:
            transport = httpx.ASGITransport(app=app)
        else:
            transport = httpx.ASGITransport(app=app, client=(peer, PEER_PORT))
        try:
            async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
                yield app.state.runtime, http
        finally:
            await app.state.runtime.close()


@asynccontextmanager
async def app_client(
    settings: Settings, *, peer: str | None = None
) -> AsyncIterator[httpx.AsyncClient]:
    """``app_and_client``'s client alone."""
    async with app_and_client(settings, peer=peer) as (_, http):
        yield http
