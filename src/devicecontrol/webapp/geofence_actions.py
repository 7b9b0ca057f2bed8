"""What the page changes of a controller's geofences (POST): add, change, pause or
resume, delete; each the API's geofence service, answered with a message and the rows
again."""

from __future__ import annotations

from typing import Any

from litestar import Request, post
from litestar.di import NamedDependency
from litestar.params import FromPath
from litestar.response import Template

from devicecontrol.auth.sessions import WebSession
from devicecontrol.automations.geofences import service as geofences
from devicecontrol.devices.commands import service as commands
from devicecontrol.runtime import Runtime
from devicecontrol.webapp.automation_rows import rows_changed
from devicecontrol.webapp.geofences import geofence_body, geofence_of

GEOFENCE = "/app/controllers/{serial_number:str}/geofences"


async def _form(request: Request[Any, Any, Any]) -> dict[str, str]:
    return {name: str(value) for name, value in (await request.form()).items()}


@post(GEOFENCE, include_in_schema=False, status_code=200)
async def add_geofence(
    request: Request[Any, Any, Any],
    runtime: NamedDependency[Runtime],
    viewer: NamedDependency[WebSession],
    serial_number: FromPath[str],
) -> Template:
    device = await commands.owned_device(runtime, viewer.user_id, serial_number)
    body = geofence_body(serial_number, device.type, await _form(request))
    await geofences.create_geofence(runtime, viewer.user_id, body)
    return await rows_changed(runtime, viewer, serial_number, "geofence", "added")


@post(GEOFENCE + "/{geofence_id:str}", include_in_schema=False, status_code=200)
async def change_geofence(
    request: Request[Any, Any, Any],
    runtime: NamedDependency[Runtime],
    viewer: NamedDependency[WebSession],
    serial_number: FromPath[str],
    geofence_id: FromPath[str],
) -> Template:
    """The whole form again: place, radius, what entering and leaving fire; the API's PUT
    rules, the state (active or paused) kept."""
    row = await geofence_of(runtime, viewer.user_id, serial_number, geofence_id)
    body = geofence_body(serial_number, row.controller_type, await _form(request))
    await geofences.update_geofence(runtime, row, body)
    return await rows_changed(runtime, viewer, serial_number, "geofence", "changed")


@post(GEOFENCE + "/{geofence_id:str}/active", include_in_schema=False, status_code=200)
async def pause_or_resume_geofence(
    runtime: NamedDependency[Runtime],
    viewer: NamedDependency[WebSession],
    serial_number: FromPath[str],
    geofence_id: FromPath[str],
) -> Template:
    row = await geofence_of(runtime, viewer.user_id, serial_number, geofence_id)
    await geofences.update_geofence(runtime, row, {"active": 0 if row.active else 1})
    return await rows_changed(runtime, viewer, serial_number, "geofence", "changed")


@post(GEOFENCE + "/{geofence_id:str}/delete", include_in_schema=False, status_code=200)
async def delete_geofence(
    runtime: NamedDependency[Runtime],
    viewer: NamedDependency[WebSession],
    serial_number: FromPath[str],
    geofence_id: FromPath[str],
) -> Template:
    await geofence_of(runtime, viewer.user_id, serial_number, geofence_id)
    await geofences.delete_geofence(runtime, viewer.user_id, geofence_id)
    return await rows_changed(runtime, viewer, serial_number, "geofence", "deleted")


GEOFENCE_ACTIONS = [add_geofence, change_geofence, pause_or_resume_geofence, delete_geofence]
