"""Built apps, reused by the in-process tests.

Building one costs 100-150 ms (Litestar copies every handler as it registers it), more
than most tests' own work; nothing in a built app depends on the database it serves
(``devicecontrol.app.serve_runtime`` gives it one). An app is lent to one test at a time.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager

from litestar.testing import AsyncTestClient

from devicecontrol.app import ServiceApp, build_app, serve_runtime
from devicecontrol.config import Settings
from devicecontrol.runtime import Runtime

_IDLE: dict[bool, list[ServiceApp]] = {True: [], False: []}  # by whether it has the web app


@contextmanager
def lent_app(settings: Settings, *, hot_reads: bool = True) -> Iterator[ServiceApp]:
    """An app serving a new runtime on ``settings``, as ``create_app(settings)`` builds
    one; given back to the idle ones when the block ends (the runtime is the caller's to
    close, or the app's lifespan closes it)."""
    idle = _IDLE[settings.web_app]
    app = idle.pop() if idle else build_app(web_app=settings.web_app)
    try:
        yield serve_runtime(app, Runtime.from_settings(settings), hot_reads=hot_reads)
    finally:
        idle.append(app)


@asynccontextmanager
async def lent_client(settings: Settings) -> AsyncIterator[AsyncTestClient[ServiceApp]]:
    """Litestar's test client of a lent app on ``settings``, its lifespan run."""
    with lent_app(settings) as app:
        async with AsyncTestClient(app=app) as client:
            yield client
