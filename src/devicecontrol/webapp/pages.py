"""The app's pages (GET): what the signed-in owner sees, read through the API's services."""

from __future__ import annotations

from typing import Any

from litestar import MediaType, Request, get
from litestar.di import NamedDependency
from litestar.exceptions import NotFoundException
from litestar.params import FromPath, FromQuery
from litestar.response import Redirect, Template

from devicecontrol.auth.sessions import WebSession, find_session, session_secret
from devicecontrol.controllers import service as controllers
from devicecontrol.devices.commands import service as commands
from devicecontrol.runtime import Runtime
from devicecontrol.users.service import get_profile
from devicecontrol.webapp.activity import latest_commands, latest_readings
from devicecontrol.webapp.chart import DEFAULT_PERIOD, PERIODS, energy_chart, readings_chart
from devicecontrol.webapp.controls import command_controls
from devicecontrol.webapp.geofences import geofences_of
from devicecontrol.webapp.schedules import schedule_actions, schedules_of
from devicecontrol.webapp.shown import controller_rows, one_controller

APP_HOME = "/app/"
PLUG = "smart_plug"  # its energy per day is charted as bars


def page(name: str, session: WebSession | None, **context: Any) -> Template:
    """A template with what every page's frame needs: the session (for its CSRF token)."""
    context = {"session": session, **context}
    return Template(template_name=name, context=context, media_type=MediaType.HTML)


@get("/", include_in_schema=False)
async def root() -> Redirect:
    """A browser asking for the service's root is sent to the app."""
    return Redirect(APP_HOME, status_code=302)


@get("/app/login", include_in_schema=False)
async def login_page(request: Request[Any, Any, Any], runtime: NamedDependency[Runtime]) -> Any:
    if await find_session(runtime, session_secret(request, runtime)) is not None:
        return Redirect(APP_HOME, status_code=303)
    return page("login.html", None)


@get("/app/", include_in_schema=False)
async def controllers_page(
    runtime: NamedDependency[Runtime], viewer: NamedDependency[WebSession]
) -> Template:
    rows, total = await controller_rows(runtime, viewer.user_id)
    return page("controllers.html", viewer, rows=rows, total=total)


@get("/app/controllers/rows", include_in_schema=False)
async def controller_rows_fragment(
    runtime: NamedDependency[Runtime], viewer: NamedDependency[WebSession]
) -> Template:
    """The list's rows alone: the page's script asks for them when its stream says the set
    of controllers changed (one claimed elsewhere, or a gap in the events)."""
    rows, _ = await controller_rows(runtime, viewer.user_id)
    return page("_rows.html", viewer, rows=rows, oob=False)


@get("/app/controllers/{serial_number:str}", include_in_schema=False)
async def controller_page(
    runtime: NamedDependency[Runtime],
    viewer: NamedDependency[WebSession],
    serial_number: FromPath[str],
) -> Template:
    """One controller of the viewer's; another's, or an unknown one, is the API's 404."""
    detail = await controllers.controller_detail(runtime, viewer.user_id, serial_number)
    device = await commands.owned_device(runtime, viewer.user_id, serial_number)
    user_id = viewer.user_id
    controls = command_controls(device.type, detail.command_log)
    energy = await energy_chart(runtime, user_id, serial_number) if device.type == PLUG else None
    return page(
        "controller.html",
        viewer,
        controller=one_controller(detail.row),
        periods=list(PERIODS),
        period=DEFAULT_PERIOD,
        chart=await readings_chart(runtime, user_id, serial_number, DEFAULT_PERIOD),
        energy=energy,
        controls=controls,
        readings=await latest_readings(runtime, device),
        commands=await latest_commands(runtime, device),
        schedules=await schedules_of(runtime, user_id, serial_number),
        geofences=await geofences_of(runtime, user_id, serial_number),
        actions=schedule_actions(controls),
        oob=False,
    )


@get("/app/controllers/{serial_number:str}/chart", include_in_schema=False)
async def chart_fragment(
    runtime: NamedDependency[Runtime],
    viewer: NamedDependency[WebSession],
    serial_number: FromPath[str],
    period: FromQuery[str] = DEFAULT_PERIOD,
) -> Template:
    """The readings' chart over another period (the page's period buttons)."""
    row = await controllers.get_controller(runtime, viewer.user_id, serial_number)
    chart = await readings_chart(runtime, viewer.user_id, serial_number, period)
    return page(
        "_chart.html",
        viewer,
        controller=one_controller(row),
        periods=list(PERIODS),
        period=period,
        chart=chart,
    )


@get("/app/controllers/{serial_number:str}/commands", include_in_schema=False)
async def command_rows_fragment(
    runtime: NamedDependency[Runtime],
    viewer: NamedDependency[WebSession],
    serial_number: FromPath[str],
) -> Template:
    """The commands' rows alone, for the page's script when a command it has not drawn
    changes (one made by the API, or by another browser)."""
    device = await commands.owned_device(runtime, viewer.user_id, serial_number)
    shown = await latest_commands(runtime, device)
    return page("_commands.html", viewer, commands=shown, oob=False)


@get("/app/profile", include_in_schema=False)
async def profile_page(
    runtime: NamedDependency[Runtime], viewer: NamedDependency[WebSession]
) -> Template:
    return page("profile.html", viewer, profile=await get_profile(runtime, viewer.user_id))


@get("/app/{rest:path}", include_in_schema=False)
async def unknown_page(rest: FromPath[str]) -> None:
    """Any other path under /app/: the not-found page, in words."""
    raise NotFoundException()


PAGES = [
    chart_fragment,
    command_rows_fragment,
    unknown_page,
    root,
    login_page,
    controllers_page,
    controller_rows_fragment,
    controller_page,
    profile_page,
]
