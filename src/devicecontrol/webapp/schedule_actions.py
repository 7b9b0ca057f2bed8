"""What the page changes of a controller's schedules (POST): add, pause or resume, delete;
each the API's schedule service, each answered with a message and the rows again."""

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
from devicecontrol.webapp.pages import page
from devicecontrol.webapp.schedules import schedule_body, schedules_of
from devicecontrol.webapp.wording import words

SCHEDULE = "/app/controllers/{serial_number:str}/schedules"


async def _changed(
    runtime: Runtime, viewer: WebSession, serial_number: str, message_key: str
) -> Template:
    rows = await schedules_of(runtime, viewer.user_id, serial_number)
    return page(
        "_schedules_changed.html",
        viewer,
        message=words(message_key),
        alert=False,
        schedules=rows,
        oob=True,
    )


@post(SCHEDULE, include_in_schema=False, status_code=200)
async def add_schedule(
    request: Request[Any, Any, Any],
    runtime: NamedDependency[Runtime],
    viewer: NamedDependency[WebSession],
    serial_number: FromPath[str],
) -> Template:
    form = await request.form()
    device = await commands.owned_device(runtime, viewer.user_id, serial_number)
    fields = {name: str(value) for name, value in form.items()}
    days = [str(d) for d in form.getall("day", [])]
    body = schedule_body(serial_number, device.type, fields, days)
    await schedules.create_schedule(runtime, viewer.user_id, body)
    return await _changed(runtime, viewer, serial_number, "schedule.added")


@post(SCHEDULE + "/{schedule_id:str}/active", include_in_schema=False, status_code=200)
async def pause_or_resume_schedule(
    runtime: NamedDependency[Runtime],
    viewer: NamedDependency[WebSession],
    serial_number: FromPath[str],
    schedule_id: FromPath[str],
) -> Template:
    row = await schedules.get_schedule(runtime, viewer.user_id, serial_number, schedule_id)
    await schedules.update_schedule(runtime, row, {"active": 0 if row.active else 1})
    return await _changed(runtime, viewer, serial_number, "schedule.changed")


@post(SCHEDULE + "/{schedule_id:str}/delete", include_in_schema=False, status_code=200)
async def delete_schedule(
    runtime: NamedDependency[Runtime],
    viewer: NamedDependency[WebSession],
    serial_number: FromPath[str],
    schedule_id: FromPath[str],
) -> Template:
    row = await schedules.get_schedule(runtime, viewer.user_id, serial_number, schedule_id)
    await schedules.delete_schedule(runtime, row)
    return await _changed(runtime, viewer, serial_number, "schedule.deleted")


SCHEDULE_ACTIONS = [add_schedule, pause_or_resume_schedule, delete_schedule]
