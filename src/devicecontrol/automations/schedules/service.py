"""The rules of schedules (contract §12): the owner's only, weekly times in an IANA zone
(the owner's profile's by default), commands checked against the catalogue when written.

When they fire is schedules/timing.py's; firing them is schedules/runner.py's.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Row

from devicecontrol.automations import shared as automations
from devicecontrol.automations.schedules import repository, timing
from devicecontrol.clock import utcnow
from devicecontrol.database.engine import Reader
from devicecontrol.database.pages import Page, PageRequest
from devicecontrol.devices import service as devices
from devicecontrol.devices.commands import service as commands
from devicecontrol.errors import FieldError, InvalidFields, NotFound
from devicecontrol.runtime import Runtime

NO_PROFILE_ZONE = "UTC"  # a user without a country record


def _not_found(serial_number: str, schedule_id: str) -> NotFound:
    return NotFound(f"No schedule {schedule_id[:32]} of controller {serial_number} is yours.")


async def list_schedules(
    runtime: Runtime, user_id: int, paging: PageRequest, serial_number: str | None = None
) -> Page:
    """The caller's schedules, of one controller of theirs (else the usual 404) or all."""
    controller_id = None
    if serial_number is not None:
        controller_id = (await commands.owned_device(runtime, user_id, serial_number)).controller_id
    async with runtime.database.read() as connection:
        total = await repository.count_owned(connection, user_id, controller_id)
        rows = []
        if paging.offset < total:
            rows = await repository.list_owned(
                connection, user_id, controller_id, limit=paging.page_size, offset=paging.offset
            )
    return Page(rows=rows, total=total, page_count=paging.page_count(total))


async def get_schedule(
    runtime: Runtime, user_id: int, serial_number: str, schedule_id: str
) -> Row[Any]:
    device = await commands.owned_device(runtime, user_id, serial_number)
    number = automations.parse_id(schedule_id)
    if number is not None:
        async with runtime.database.read() as connection:
            row = await repository.find_owned(connection, user_id, device.controller_id, number)
        if row is not None:
            return row
    raise _not_found(serial_number, schedule_id)


def _time_field(body: dict[str, Any], field: str, errors: list[FieldError]) -> str | None:
    value = body.get(field)
    if value is None:
        if field == "from_time":
            errors.append(FieldError(field, "is required, HH:MM"))
        return None
    if not isinstance(value, str) or timing.parse_time(value) is None:
        errors.append(FieldError(field, "must be HH:MM (00:00 to 23:59)"))
        return None
    return value


def _values(device_type: str, body: dict[str, Any], default_zone: str) -> dict[str, Any]:
    """Every column a schedule is written with, from a complete body; 400 naming each bad
    field."""
    errors: list[FieldError] = []
    days = body.get("days")
    if not isinstance(days, str) or not timing.is_days(days):
        errors.append(FieldError("days", "must be seven 0/1 characters, Monday first"))
    from_time, to_time = (
        _time_field(body, "from_time", errors),
        _time_field(body, "to_time", errors),
    )
    if from_time is not None and from_time == to_time:
        errors.append(FieldError("to_time", "must differ from from_time"))
    zone_name = body.get("time_zone")
    zone_name = default_zone if zone_name is None else zone_name
    if not isinstance(zone_name, str) or timing.zone(zone_name) is None:
        errors.append(FieldError("time_zone", "must be an IANA time zone, such as Europe/Sofia"))
    values: dict[str, Any] = {
        "days": days,
        "from_time": from_time,
        "to_time": to_time,
        "time_zone": zone_name,
        "active": automations.flag(body, "active", True, errors),
        "command_name": body.get("command_name"),
    }
    params = automations.command_fields(body, "command_fields", errors)
    values["command_fields"] = automations.checked_command(
        device_type, body.get("command_name"), params, name_field="command_name",
        fields_field="command_fields", errors=errors,
    )  # fmt: skip
    values.update(end_command_name=None, end_command_fields=None)
    if body.get("end_command_name") is not None:
        if body.get("to_time") is None:
            errors.append(FieldError("to_time", "is required with end_command_name"))
        params = automations.command_fields(body, "end_command_fields", errors)
        values["end_command_name"] = body["end_command_name"]
        values["end_command_fields"] = automations.checked_command(
            device_type, body["end_command_name"], params, name_field="end_command_name",
            fields_field="end_command_fields", errors=errors,
        )  # fmt: skip
    if errors:
        raise InvalidFields(errors)
    values.update(_next(values))
    return values


def timetable(values: Any) -> timing.Timetable:
    """The timetable of a schedule (a row, or the values it is written with)."""

    def get(name: str) -> Any:
        return values.get(name) if isinstance(values, dict) else getattr(values, name)

    to_time = get("to_time")
    zone = timing.zone(str(get("time_zone")))
    assert zone is not None, "checked when written"
    from_time = timing.parse_time(str(get("from_time")))
    assert from_time is not None, "checked when written"
    return timing.Timetable(
        days=str(get("days")),
        from_time=from_time,
        to_time=None if to_time is None else timing.parse_time(to_time),
        zone=zone,
        with_end=get("end_command_name") is not None,
    )


def _next(values: dict[str, Any]) -> dict[str, Any]:
    """The first firing after now (none while inactive)."""
    found = timing.next_firing(timetable(values), timing.as_aware_utc(utcnow()))
    if not values["active"] or found is None:
        return {"next_fire_at": None, "next_kind": None}
    return {"next_fire_at": timing.as_naive_utc(found[0]), "next_kind": found[1]}


async def _default_zone(connection: Reader, user_id: int) -> str:
    return await repository.profile_time_zone(connection, user_id) or NO_PROFILE_ZONE


async def create_schedule(runtime: Runtime, user_id: int, body: dict[str, Any]) -> Row[Any]:
    """A schedule of the caller's controller (``controller_id``, its serial number)."""
    device = await devices.device_named_in(runtime, user_id, body, "controller_id")
    default_zone = NO_PROFILE_ZONE
    if body.get("time_zone") is None:
        async with runtime.database.read() as connection:
            default_zone = await _default_zone(connection, user_id)
    values = _values(device.type, body, default_zone)  # checked before the write begins
    async with runtime.database.write() as connection:
        await automations.make_room(connection, device, "schedules", repository.count_of_controller)
        new_id = await repository.insert_schedule(
            connection,
            {
                **values,
                "controller_id": device.controller_id,
                "user_id": user_id,
                "created_at": utcnow(),
            },
        )
        row = await repository.find_owned(connection, user_id, device.controller_id, new_id)
    assert row is not None  # written in this transaction
    return row


def _as_body(row: Row[Any]) -> dict[str, Any]:
    """A stored schedule as a complete body, for a change to be checked whole."""
    body = {
        name: getattr(row, name)
        for name in ("days", "from_time", "to_time", "time_zone", "command_name")
    }
    body["active"] = bool(row.active)
    body["command_fields"] = automations.stored_fields(row.command_fields)
    if row.end_command_name is not None:
        body["end_command_name"] = row.end_command_name
        body["end_command_fields"] = automations.stored_fields(row.end_command_fields)
    return body


async def update_schedule(runtime: Runtime, row: Row[Any], body: dict[str, Any]) -> Row[Any]:
    """Change what the body names of the schedule ``get_schedule`` read (``to_time`` and
    ``end_command_name`` may be set to null); checked whole; the next firing is worked out
    again from now."""
    automations.keeps_its_controller(body, row.serial_number, "schedule")
    nullable = ("to_time", "end_command_name", "end_command_fields")
    changed = {k: v for k, v in body.items() if v is not None or k in nullable}
    if changed.get("end_command_name") is None and "end_command_name" in changed:
        changed["end_command_fields"] = None
    values = _values(row.controller_type, {**_as_body(row), **changed}, row.time_zone)
    async with runtime.database.write() as connection:
        if not await repository.update_schedule(connection, row.id, values):
            raise _not_found(row.serial_number, str(row.id))  # deleted meanwhile
        changed_row = await repository.find_owned(
            connection, row.user_id, row.controller_id, row.id
        )
    assert changed_row is not None
    return changed_row


async def delete_schedule(runtime: Runtime, row: Row[Any]) -> None:
    async with runtime.database.write() as connection:
        if not await repository.delete_schedule(connection, row.id):
            raise _not_found(row.serial_number, str(row.id))
