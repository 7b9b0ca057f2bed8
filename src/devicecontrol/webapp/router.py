"""The app's routes in one router: session-authenticated (not the API's bearer tokens),
kept out of the OpenAPI document, failures shown in words; its files under /app/static."""

from __future__ import annotations

from pathlib import Path

from litestar import Router
from litestar.di import Provide
from litestar.static_files import create_static_files_router

from devicecontrol.webapp.actions import ACTIONS
from devicecontrol.webapp.failures import FAILURE_HANDLERS
from devicecontrol.webapp.geofence_actions import GEOFENCE_ACTIONS
from devicecontrol.webapp.pages import PAGES
from devicecontrol.webapp.schedule_actions import SCHEDULE_ACTIONS
from devicecontrol.webapp.viewer import provide_viewer

STATIC = Path(__file__).parent / "static"


def webapp_router() -> Router:
    static = create_static_files_router(
        path="/app/static",
        directories=[STATIC],
        name="webapp-static",
        include_in_schema=False,
        opt={"exclude_from_auth": True},
    )
    return Router(
        path="/",
        route_handlers=[*PAGES, *ACTIONS, *SCHEDULE_ACTIONS, *GEOFENCE_ACTIONS, static],
        dependencies={"viewer": Provide(provide_viewer)},
        exception_handlers=FAILURE_HANDLERS,
        include_in_schema=False,
        opt={"exclude_from_auth": True},  # the bearer middleware's; the session is checked
    )
