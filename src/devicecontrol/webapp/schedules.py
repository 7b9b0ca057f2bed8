"""A controller's weekly schedules as its page shows and changes them, through the API's
schedule services (the same checks, the same 400s in words).

What a schedule fires is picked from the commands the type accepts, each with its values
set (a plug's "Switch on", a melissa's current settings), encoded in the option's value as
``name?field=value&...``; the form's fields become the API's body."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode

from sqlalchemy import Row

from devicecontrol.automations.schedules import service as schedules
from devicecontrol.database.pages import PageRequest
from devicecontrol.runtime import Runtime
from devicecontrol.webapp.controls import CommandControl, sent_fields
from devicecontrol.webapp.wording import words, words_or

SHOWN = 50  # a controller's schedules on its page
DAYS = 7  # Monday first, as the API's ``days``


@dataclass(frozen=True, slots=True)
class Action:
    """One thing a schedule can fire: a command with its values."""

    value: str  # "name?field=value&..."
    label: str


def schedule_actions(controls: list[CommandControl]) -> list[Action]:
    actions = []
    for control in controls:
        if control.switch:
            field = control.fields[0].name
            for state in ("on", "off"):
                label = f"{control.label}: {words('command.' + state)}"
                actions.append(Action(f"{control.name}?{urlencode({field: state})}", label))
            continue
        values = {
            f.name: f.current
            if f.current is not None
            else (f.choices[0].value if f.choices else str(f.low))
            for f in control.fields
        }
        shown = ", ".join(
            next((c.label for c in f.choices if c.value == values[f.name]), values[f.name])
            for f in control.fields
        )
        label = f"{control.label}: {shown}" if shown else control.label
        actions.append(Action(f"{control.name}?{urlencode(values)}", label))
    return actions


def offered(
    actions: list[Action], name: str | None, stored_fields: str | None
) -> list[tuple[Action, bool]]:
    """The options of a change form's command list, the stored command selected; one not
    among ``actions`` (a melissa's settings of another day) is offered first, as stored,
    so that saving other changes keeps it."""
    if name is None:
        return [(action, False) for action in actions]
    fields = json.loads(stored_fields) if stored_fields else {}
    value = f"{name}?{urlencode({key: str(v) for key, v in fields.items()})}"
    listed = [(action, action.value == value) for action in actions]
    if not any(selected for _, selected in listed):
        shown = ", ".join(str(v) for v in fields.values())
        label = words_or(f"command.{name}", name) + (f": {shown}" if shown else "")
        listed.insert(0, (Action(value, label), True))
    return listed


def picked_command(device_type: str, action: str) -> tuple[str, dict[str, Any]]:
    """The command and values an option of ``schedule_actions`` names."""
    name, _, query = action.partition("?")
    return name, sent_fields(device_type, name, dict(parse_qsl(query)))


def schedule_body(
    serial_number: str, device_type: str, form: dict[str, Any], days: list[str]
) -> dict[str, Any]:
    """The API's body of a new schedule, from the page's form."""
    name, fields = picked_command(device_type, str(form.get("action", "")))
    body: dict[str, Any] = {
        "controller_id": serial_number,
        "days": "".join("1" if str(d) in days else "0" for d in range(DAYS)),
        "from_time": form.get("from_time") or None,
        "to_time": form.get("to_time") or None,
        "command_name": name,
        "command_fields": fields,
    }
    if form.get("end_action"):
        body["end_command_name"], body["end_command_fields"] = picked_command(
            device_type, str(form["end_action"])
        )
    return body


async def schedules_of(runtime: Runtime, user_id: int, serial_number: str) -> list[Row[Any]]:
    page = await schedules.list_schedules(runtime, user_id, PageRequest(1, SHOWN), serial_number)
    return page.rows
