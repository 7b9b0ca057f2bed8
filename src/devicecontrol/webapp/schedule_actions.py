"""What the page changes of a controller's schedules (POST): add, change, pause or
resume, delete; each the API's schedule service, each answered with a message and the
rows again."""

from __future__ import annotations

from typing import Any

from litestar import Request, post
from litestar.di import NamedDependency
from litestar.params import FromPath
from litestar.response import Template

from devicecontrol.auth.sessions import WebSession
from devicecontrol.automations.schedules import service as schedules
from devicecontrol.devices.commands import service as commands
from devicecontrol.runtime import Runtime
from devicecontrol.webapp.automation_rows import rows_changed
from devicecontrol.webapp.schedules import schedule_body

SCHEDULE = "/app/controllers/{serial_number:str}/schedules"


async def _form_body(
    request: Request[Any, Any, Any], serial_number: str, device_type: str
) -> dict[str, Any]:
    form = await request.form()
    fields = {name: str(value) for name, value in form.items()}
    days = [str(d) for d in form.getall("day", [])]
    return schedule_body(serial_number, device_type, fields, days)


@post(SCHEDULE, include_in_schema=False, status_code=200)
async def add_schedule(
    request: Request[Any, Any, Any],
    runtime: NamedDependency[Runtime],
    viewer: NamedDependency[WebSession],
    serial_number: FromPath[str],
) -> Template:
    device = await commands.owned_device(runtime, viewer.user_id, serial_number)
    body = await _form_body(request, serial_number, device.type)
    await schedules.create_schedule(runtime, viewer.user_id, body)
    return await rows_changed(runtime, viewer, serial_number, "schedule", "added")


@post(SCHEDULE + "/{schedule_id:str}", include_in_schema=False, status_code=200)
async def change_schedule(
    request: Request[Any, Any, Any],
    runtime: NamedDependency[Runtime],
    viewer: NamedDependency[WebSession],
    serial_number: FromPath[str],
    schedule_id: FromPath[str],
) -> Template:
    """The whole form again: days, times, what it fires (an empty end action or end
    time clears it); the API's PUT rules, the state (active or paused) kept."""
    row = await schedules.get_schedule(runtime, viewer.user_id, serial_number, schedule_id)
    body = await _form_body(request, serial_number, row.controller_type)
    body.setdefault("end_command_name", None)
    await schedules.update_schedule(runtime, row, body)
    return await rows_changed(runtime, viewer, serial_number, "schedule", "changed")


@post(SCHEDULE + "/{schedule_id:str}/active", include_in_schema=False, status_code=200)
async def pause_or_resume_schedule(
    runtime: NamedDependency[Runtime],
    viewer: NamedDependency[WebSession],
    serial_number: FromPath[str],
    schedule_id: FromPath[str],
) -> Template:
    row = await schedules.get_schedule(runtime, viewer.user_id, serial_number, schedule_id)
    await schedules.update_schedule(runtime, row, {"active": 0 if row.active else 1})
    return await rows_changed(runtime, viewer, serial_number, "schedule", "changed")


@post(SCHEDULE + "/{schedule_id:str}/delete", include_in_schema=False, status_code=200)
async def delete_schedule(
    runtime: NamedDependency[Runtime],
    viewer: NamedDependency[WebSession],
    serial_number: FromPath[str],
    schedule_id: FromPath[str],
) -> Template:
    row = await schedules.get_schedule(runtime, viewer.user_id, serial_number, schedule_id)
    await schedules.delete_schedule(runtime, row)
    return await rows_changed(runtime, viewer, serial_number, "schedule", "deleted")


SCHEDULE_ACTIONS = [add_schedule, change_schedule, pause_or_resume_schedule, delete_schedule]
