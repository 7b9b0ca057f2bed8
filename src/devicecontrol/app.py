"""create_app(settings) -> Litestar: routes at /v1 and unprefixed, auth, errors, gzip."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

from litestar import Litestar, Router
from litestar.config.compression import CompressionConfig
from litestar.di import Provide
from litestar.middleware import DefineMiddleware
from litestar.openapi import OpenAPIConfig
from litestar.openapi.plugins import SwaggerRenderPlugin

from devicecontrol import __version__
from devicecontrol.auth.middleware import BearerTokenMiddleware
from devicecontrol.auth.routes import AuthController
from devicecontrol.config import Settings, load_settings
from devicecontrol.controllers.routes import ControllersController
from devicecontrol.errors import EXCEPTION_HANDLERS
from devicecontrol.housekeeping import purge_periodically
from devicecontrol.runtime import Runtime
from devicecontrol.users.routes import UsersController

MAX_BODY_BYTES = 64 * 1024
GZIP_MINIMUM_BYTES = 1024
API_CONTROLLERS = [AuthController, UsersController, ControllersController]


def create_app(settings: Settings | None = None) -> Litestar:
    """The service on one database; the engine is disposed of at shutdown."""
    runtime = Runtime.from_settings(settings or load_settings())
    logging.getLogger("devicecontrol").setLevel(runtime.settings.log_level.upper())

    async def provide_runtime() -> Runtime:
        return runtime

    @contextlib.asynccontextmanager
    async def scheduled_purge(_: Litestar) -> AsyncIterator[None]:
        task = asyncio.create_task(purge_periodically(runtime.database, runtime.settings))
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    app = Litestar(
        route_handlers=[
            Router(path="/v1", route_handlers=API_CONTROLLERS),
            # the unprefixed paths existing clients call; documented once, under /v1
            Router(path="/", route_handlers=API_CONTROLLERS, include_in_schema=False),
        ],
        dependencies={"runtime": Provide(provide_runtime, use_cache=True)},
        middleware=[DefineMiddleware(BearerTokenMiddleware, exclude=["^/docs"])],
        exception_handlers=EXCEPTION_HANDLERS,
        compression_config=CompressionConfig(backend="gzip", minimum_size=GZIP_MINIMUM_BYTES),
        request_max_body_size=MAX_BODY_BYTES,
        openapi_config=OpenAPIConfig(
            title="devicecontrol",
            version=__version__,
            path="/docs",
            render_plugins=[SwaggerRenderPlugin(path="/")],
        ),
        lifespan=[scheduled_purge],
        on_shutdown=[runtime.close],
        debug=False,
    )
    app.state.runtime = runtime
    return app


def create_app_from_environment() -> Litestar:
    """The uvicorn factory used by ``devicecontrol serve`` (settings from the environment)."""
    return create_app(load_settings())
