"""What a change to a controller's schedules or geofences answers: a message and that
kind's rows again, each row with its change form (so the options of what it fires)."""

from __future__ import annotations

from typing import Literal

from litestar.response import Template

from devicecontrol.auth.sessions import WebSession
from devicecontrol.controllers import service as controllers
from devicecontrol.runtime import Runtime
from devicecontrol.webapp.controls import command_controls
from devicecontrol.webapp.geofences import geofences_of
from devicecontrol.webapp.pages import page
from devicecontrol.webapp.schedules import Action, schedule_actions, schedules_of
from devicecontrol.webapp.wording import words

Kind = Literal["schedule", "geofence"]
Change = Literal["added", "changed", "deleted"]


async def offered_actions(runtime: Runtime, user_id: int, serial_number: str) -> list[Action]:
    """What a schedule or geofence of this controller can fire, as its page offers it."""
    detail = await controllers.controller_detail(runtime, user_id, serial_number)
    return schedule_actions(command_controls(detail.row.type, detail.command_log))


async def rows_changed(
    runtime: Runtime, viewer: WebSession, serial_number: str, kind: Kind, change: Change
) -> Template:
    if kind == "schedule":
        rows = await schedules_of(runtime, viewer.user_id, serial_number)
    else:
        rows = await geofences_of(runtime, viewer.user_id, serial_number)
    return page(
        f"_{kind}s_changed.html",
        viewer,
        message=words(f"{kind}.{change}"),
        alert=False,
        actions=await offered_actions(runtime, viewer.user_id, serial_number),
        oob=True,
        **{f"{kind}s": rows},
    )
