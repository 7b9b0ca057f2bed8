"""create_app(settings) -> Litestar: routes at /v1 and unprefixed, auth, errors, gzip."""

from __future__ import annotations

import contextlib
import importlib.util
import logging
from collections.abc import AsyncIterator
from pathlib import Path

from litestar import Litestar, Request, Router
from litestar.config.compression import CompressionConfig
from litestar.datastructures import State
from litestar.di import Provide
from litestar.middleware import DefineMiddleware
from litestar.openapi import OpenAPIConfig
from litestar.openapi.spec import Components, Tag
from litestar.static_files import create_static_files_router
from litestar.types import ASGIApp

from devicecontrol import __version__
from devicecontrol.auth import passwords
from devicecontrol.auth.middleware import BearerTokenMiddleware
from devicecontrol.auth.routes import AuthController
from devicecontrol.automations.geofences.routes import GeofencesController
from devicecontrol.automations.schedules.routes import SchedulesController
from devicecontrol.automations.schedules.runner import fire_schedules_periodically
from devicecontrol.background import in_background
from devicecontrol.collector import collect_garbage_for_a_service
from devicecontrol.config import Settings, load_settings
from devicecontrol.controllers.routes import ControllersController
from devicecontrol.devices.asyncapi import asyncapi_json
from devicecontrol.devices.routes import DevicesController, ProviderController
from devicecontrol.errors import NotFound
from devicecontrol.events.hub import Hub
from devicecontrol.events.lane import StreamLane
from devicecontrol.events.routes import NO_COMPRESSION, EventsController
from devicecontrol.hot_reads import HotReads
from devicecontrol.housekeeping.purge import purge_periodically
from devicecontrol.http.openapi import (
    SECURITY_SCHEMES,
    ServedDocumentPlugin,
    SwaggerPage,
    openapi_json,
)
from devicecontrol.http.problems import EXCEPTION_HANDLERS
from devicecontrol.http.unprefixed import UnprefixedPaths
from devicecontrol.observability.endpoints import OPERATIONAL_HANDLERS
from devicecontrol.observability.metrics import pool_sampling
from devicecontrol.observability.request_log import RequestObserver
from devicecontrol.runtime import Runtime
from devicecontrol.users.routes import UsersController
from devicecontrol.webapp.headers import AppHeaders
from devicecontrol.webapp.router import webapp_router
from devicecontrol.webapp.templating import template_config

MAX_BODY_BYTES = 64 * 1024
GZIP_MINIMUM_BYTES = 1024
COMPRESSION = CompressionConfig(
    backend="gzip", minimum_size=GZIP_MINIMUM_BYTES, exclude_opt_key=NO_COMPRESSION
)
API_CONTROLLERS = [
    AuthController,
    UsersController,
    EventsController,  # before ControllersController: /controllers/events is not a serial
    ControllersController,
    DevicesController,
    ProviderController,
    GeofencesController,
    SchedulesController,
]
# their first path segments: a path starting with one, without /v1, is answered as /v1's
API_SEGMENTS = {"auth", "users", "controllers", "provider", "geofences", "schedules"}
API_DESCRIPTION = """\
The device-control v1 API. Every endpoint also answers without the `/v1` prefix (documented
once, under `/v1`). Successes are `application/hal+json`; every error is RFC 9457
`application/problem+json`. Token endpoints take JSON or form bodies; every other endpoint
needs `Authorization: Bearer <access_token>`.
"""
API_TAGS = [
    Tag(name="auth", description="Tokens: log in, renew, revoke (no bearer token needed)."),
    Tag(name="users", description="The caller's profile."),
    Tag(name="controllers", description="The caller's controllers and their ownership."),
    Tag(
        name="devices",
        description="What the caller's devices report and the commands they are sent: the "
        "original API's /provider endpoints and each controller's commands and readings.",
    ),
    Tag(
        name="automation",
        description="The original API's automation: geofences (a phone's position fires a "
        "controller's commands) and weekly schedules.",
    ),
]


# Swagger UI's files come from the service, not a CDN, so /docs works with no internet
DOCS_PATH, ASSETS_PATH = "/docs", "/assets"
DOCS_ASSETS = DOCS_PATH + ASSETS_PATH
SWAGGER_UI_FILES = (
    "swagger-ui-bundle.js",
    "swagger-ui-standalone-preset.js",
    "swagger-ui.css",
    "favicon-32x32.png",
)


def swagger_ui_directory() -> Path:
    """Swagger UI's distribution files, as the swagger-ui-py package ships them.

    Found without importing the package: its code, for other frameworks, is not used.
    """
    spec = importlib.util.find_spec("swagger_ui")
    locations = list(spec.submodule_search_locations or ()) if spec else []
    directory = Path(locations[0], "static") if locations else None
    missing = [n for n in SWAGGER_UI_FILES if directory is None or not (directory / n).is_file()]
    if directory is None or missing:
        raise RuntimeError(f"swagger-ui-py lacks Swagger UI's files {missing} (reinstall it)")
    return directory


def openapi_config() -> OpenAPIConfig:
    """The document at /openapi.json and /docs/openapi.json, Swagger UI at /docs; no token.

    Swagger UI's script and style sheet are served at /docs/assets, by the service itself;
    the page loads the document from /docs/openapi.json (openapi.SwaggerPage).
    """
    assets = create_static_files_router(
        path=ASSETS_PATH,
        directories=[swagger_ui_directory()],
        name="docs-assets",
        include_in_schema=False,
        opt={"exclude_from_auth": True},
    )
    swagger_ui = SwaggerPage(
        path="/",
        js_url=f"{DOCS_ASSETS}/swagger-ui-bundle.js",
        css_url=f"{DOCS_ASSETS}/swagger-ui.css",
        standalone_preset_js_url=f"{DOCS_ASSETS}/swagger-ui-standalone-preset.js",
        favicon=f"<link rel='icon' type='image/png' href='{DOCS_ASSETS}/favicon-32x32.png'>",
    )
    return OpenAPIConfig(
        title="devicecontrol",
        version=__version__,
        description=API_DESCRIPTION,
        tags=API_TAGS,
        components=Components(security_schemes=dict(SECURITY_SCHEMES)),
        openapi_router=Router(
            DOCS_PATH,
            route_handlers=[assets],
            include_in_schema=False,
            opt={"exclude_from_auth": True},
        ),
        render_plugins=[swagger_ui, ServedDocumentPlugin()],
    )


async def reject_encoded_slash(request: Request) -> None:
    """An encoded slash is a trick, not a path: ``/controllers/A%2Fassign`` is no resource.

    ASGI servers decode %2F before routing, which would turn it into a separator (and let
    it past any proxy rule written for the literal path); no serial number contains one.
    Async on purpose: Litestar runs a sync hook in a worker thread, on every request.
    """
    raw_path = request.scope.get("raw_path") or b""
    if b"%2f" in raw_path.split(b"?", 1)[0].lower():
        raise NotFound("No such resource.")


class ServiceApp(Litestar):
    """Litestar that keeps its own routing apart from what wraps it (``serve_runtime``).

    Building one costs more than 100 ms (Litestar copies every handler as it registers
    it), and nothing in it depends on the database it serves: the runtime lives in
    ``state``, so a built app can be given another one. The suite reuses its apps so.
    """

    routing: ASGIApp


def provide_runtime(state: State) -> Runtime:
    runtime: Runtime = state.runtime
    return runtime


@contextlib.asynccontextmanager
async def live_events(app: Litestar) -> AsyncIterator[None]:
    hub: Hub = app.state.event_hub
    await hub.start(end_streams_on_stop=app.state.end_streams_on_stop)
    try:
        yield
    finally:
        await hub.close()


@contextlib.asynccontextmanager
async def scheduled_purge(app: Litestar) -> AsyncIterator[None]:
    runtime: Runtime = app.state.runtime
    async with in_background(purge_periodically(runtime.database, runtime.settings)):
        yield


@contextlib.asynccontextmanager
async def run_schedules(app: Litestar) -> AsyncIterator[None]:
    async with in_background(fire_schedules_periodically(app.state.runtime)):
        yield


@contextlib.asynccontextmanager
async def sampled_pools(app: Litestar) -> AsyncIterator[None]:
    async with pool_sampling(app.state.runtime.database):
        yield


async def close_runtime(app: Litestar) -> None:
    runtime: Runtime = app.state.runtime
    await runtime.close()


def build_app(*, web_app: bool = True, schedule_runner: bool = False) -> ServiceApp:
    """The routes, middleware and lifespan, serving no runtime until ``serve_runtime``.

    ``schedule_runner=True`` fires schedules in the background (schedules/runner.py), as
    every ``serve`` process does; in-process apps (tests) leave it to the tests, whose
    statement counts and logs it would otherwise join at random moments.
    """
    app = ServiceApp(
        route_handlers=[
            # the unprefixed paths existing clients call are answered as these
            # (http/unprefixed.py): registered and documented once
            Router(path="/v1", route_handlers=API_CONTROLLERS),
            openapi_json,
            asyncapi_json,  # the device topics' document, beside it
            *OPERATIONAL_HANDLERS,  # /healthz, /readyz, /metrics: unprefixed, undocumented
            # the owners' pages at /app/, on a cookie session (webapp/)
            *([webapp_router()] if web_app else []),
        ],
        template_config=template_config(),
        dependencies={"runtime": Provide(provide_runtime, sync_to_thread=False)},
        middleware=[DefineMiddleware(BearerTokenMiddleware)],
        exception_handlers=EXCEPTION_HANDLERS,
        before_request=reject_encoded_slash,
        compression_config=COMPRESSION,
        request_max_body_size=MAX_BODY_BYTES,
        openapi_config=openapi_config(),
        lifespan=[
            live_events,
            scheduled_purge,
            *([run_schedules] if schedule_runner else []),
            sampled_pools,
        ],
        on_shutdown=[close_runtime],
        # logging is set up by `serve` (observability/logs.py), not by each app
        logging_config=None,
        debug=False,
    )
    app.routing = app.asgi_handler
    return app


def serve_runtime(
    app: ServiceApp,
    runtime: Runtime,
    *,
    hot_reads: bool = True,
    end_streams_on_stop: bool = False,
) -> ServiceApp:
    """``app`` serving ``runtime`` (whatever it served before is forgotten); returns it.

    ``hot_reads=False`` leaves every request to Litestar, the event streams' too: tests
    compare the lanes.
    ``end_streams_on_stop=True`` (``serve``) ends the event streams at SIGTERM (hub.py).
    """
    logging.getLogger("devicecontrol").setLevel(runtime.settings.log_level.upper())
    event_hub = Hub(runtime)
    app.state = State(
        {"runtime": runtime, "event_hub": event_hub, "end_streams_on_stop": end_streams_on_stop}
    )
    # the app's pages carry their security headers whatever answers them (webapp/headers.py)
    handler: ASGIApp = AppHeaders(UnprefixedPaths(app.routing, API_SEGMENTS))
    if hot_reads:  # the polled reads, without the framework's per-request work
        handler = HotReads(handler, runtime, max_body_bytes=MAX_BODY_BYTES, compression=COMPRESSION)
        # the event streams, held for minutes, in a lane of their own (events/lane.py)
        handler = StreamLane(handler, runtime, event_hub)
    # outside routing and error handling, so that every answer, 404s included, is observed
    app.asgi_handler = RequestObserver(handler, runtime.settings.trusted_proxies)
    return app


def create_app(
    settings: Settings | None = None,
    *,
    hot_reads: bool = True,
    schedule_runner: bool = False,
    end_streams_on_stop: bool = False,
) -> ServiceApp:
    """The service on one database; the engine is disposed of at shutdown (``build_app``
    and ``serve_runtime`` say what the switches do)."""
    runtime = Runtime.from_settings(settings or load_settings())
    app = build_app(web_app=runtime.settings.web_app, schedule_runner=schedule_runner)
    return serve_runtime(app, runtime, hot_reads=hot_reads, end_streams_on_stop=end_streams_on_stop)


def create_app_from_environment() -> ServiceApp:
    """The uvicorn factory used by ``devicecontrol serve`` (settings from the environment)."""
    logging.captureWarnings(True)  # Python's warnings, too, become lines in the log format
    # no format writes a record's thread or process: skip looking them up for every line
    logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False
    settings = load_settings()
    if settings.password_hashing != passwords.STANDARD:
        logging.getLogger("devicecontrol").warning(
            "DEVICECONTROL_PASSWORD_HASHING=%s: password hashes cost next to nothing to "
            "guess; for test suites only, never in production",
            settings.password_hashing,
        )
    app = create_app(settings, schedule_runner=True, end_streams_on_stop=True)
    collect_garbage_for_a_service()  # after the app: its objects are frozen, too
    return app
