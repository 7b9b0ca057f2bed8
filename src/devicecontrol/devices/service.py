"""What the HTTP endpoints of contract §10 ask of the device domain.

Ownership comes first: someone else's controller and an unknown one get the same 404
before anything else in the request is looked at. Then the request's own fields (the
body, ``wait``, ``since``/``until``, paging) are checked here, and ``commands/service.py`` and
``readings/service.py`` do the rest.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import msgspec
from sqlalchemy import Row

from devicecontrol.clock import TIMESTAMP_FORMAT, TIMESTAMP_PATTERN, utcnow
from devicecontrol.database.pages import Page, PageRequest
from devicecontrol.devices.catalogue import MELISSA, integral
from devicecontrol.devices.commands import service as commands
from devicecontrol.devices.commands.service import OwnedDevice
from devicecontrol.devices.readings import export, summary
from devicecontrol.devices.readings import service as readings
from devicecontrol.devices.readings.aggregates import Range
from devicecontrol.devices.schemas import CommandRequest
from devicecontrol.errors import FieldError, InvalidField, InvalidFields, NotFound
from devicecontrol.http.fields import check_string_fields, decode_body
from devicecontrol.http.paging import page_request
from devicecontrol.http.parameters import whole_number
from devicecontrol.runtime import Runtime
from devicecontrol.users import repository as users_repository

# Home Assistant's Melissa climate entity reads these four from ``command_log`` as the air
# conditioner's current settings, and fails on a missing key or a null. Until the owner has
# sent a ``send_ir_code``, a melissa is shown off, auto mode, 20 °C, auto fan: the honest
# "off until told otherwise" (docs/DESIGN.md).
NO_SETTINGS_YET = {"state": 0, "mode": 0, "temp": 20, "fan": 0}
MAX_WAIT_S = 30
PROVIDER_FIELDS = ("serial_number", "command")
_TIMESTAMP = re.compile(TIMESTAMP_PATTERN)
# commands.create_command makes 24 lowercase hex digits; the column holds 32
COMMAND_ID = re.compile(r"[0-9a-f]{1,32}")
# an export without since or until: everything kept (the retention bounds it)
EARLIEST = datetime(1970, 1, 1)
LATEST = datetime(9999, 12, 31)
_decode = msgspec.json.decode


async def device_of(runtime: Runtime, user_id: int, serial_number: str) -> OwnedDevice:
    """The caller's controller, or the usual 404 (before the request's body is read)."""
    return await commands.owned_device(runtime, user_id, serial_number)


async def device_named_in(
    runtime: Runtime, user_id: int, body: dict[str, Any], field: str = "serial_number"
) -> OwnedDevice:
    """The caller's controller a body names by its serial number (``/provider/*``; an
    automation's ``controller_id``): that one field is checked first, then the usual 404,
    before the rest of the body."""
    check_string_fields(body, (field,))
    return await commands.owned_device(runtime, user_id, body[field])


# --- the original API: /provider/send and /provider/fetch ---------------------------------


async def provider_send(runtime: Runtime, user_id: int, body: dict[str, Any]) -> Row[Any]:
    """Make the command the body names; wait up to SEND_WAIT_MS for a connected device's
    result. Fields the command does not take are ignored (Home Assistant sends them)."""
    device = await device_named_in(runtime, user_id, body)
    check_string_fields(body, ("command",))
    command = await commands.create_command(
        runtime,
        device,
        name=body["command"],
        fields={name: value for name, value in body.items() if name not in PROVIDER_FIELDS},
        ttl_s=runtime.settings.command_ttl_s,
        strict=False,
        name_field="command",
    )
    wait_ms = runtime.settings.send_wait_ms
    if device.online and wait_ms > 0:
        command = await commands.wait_until_finished(
            runtime, device, command, timeout_s=wait_ms / 1000
        )
    return command


async def provider_fetch(runtime: Runtime, user_id: int, body: dict[str, Any]) -> dict[str, Any]:
    """The latest reading of the current ownership, with the link's ``online``."""
    check_string_fields(body, ("serial_number",))
    device, latest = await commands.owned_device_and_reading(
        runtime, user_id, body["serial_number"]
    )
    return readings.provider_fetch(device, latest)


# --- native commands -------------------------------------------------------------------


def wait_seconds(text: str | None) -> int:
    """``?wait=``: whole seconds, 0 to 30 (absent: 0)."""
    problem = f"must be whole seconds, 0 to {MAX_WAIT_S}"
    seconds = whole_number(text, "wait", problem, MAX_WAIT_S)
    if seconds is not None and seconds > MAX_WAIT_S:
        raise InvalidField("wait", problem)
    return seconds or 0


def _native_request(body: dict[str, Any]) -> CommandRequest:
    """The native body as ``CommandRequest``; ``ttl`` as an integral number (``60.0``)
    counts as whole seconds, as the catalogue's integers do."""
    ttl = integral(body.get("ttl"))
    if ttl is not None:
        body = {**body, "ttl": ttl}
    return decode_body(body, CommandRequest)


async def create_command(
    runtime: Runtime, device: OwnedDevice, body: dict[str, Any], *, wait: str | None
) -> Row[Any]:
    """A command checked strictly against the type's catalogue (parameters it does not take
    are refused); with ``wait``, the answer waits until it finishes or that many seconds."""
    wait_s = wait_seconds(wait)
    sent = _native_request(body)
    command = await commands.create_command(
        runtime,
        device,
        name=sent.name,
        fields=sent.params or {},
        ttl_s=runtime.settings.command_ttl_s if sent.ttl is None else sent.ttl,
        strict=True,
    )
    if wait_s > 0:
        command = await commands.wait_until_finished(runtime, device, command, timeout_s=wait_s)
    return command


async def command_of(
    runtime: Runtime, user_id: int, serial_number: str, command_id: str
) -> Row[Any]:
    """One command of the caller's controller, made under the current ownership."""
    device = await commands.owned_device(runtime, user_id, serial_number)
    if not COMMAND_ID.fullmatch(command_id):
        raise NotFound(f"No command {command_id[:64]} of this controller is yours.")
    return await commands.get_command(runtime, device, command_id)


async def commands_page(
    runtime: Runtime,
    user_id: int,
    serial_number: str,
    *,
    page: str | None,
    page_size: str | None,
) -> tuple[Page, PageRequest]:
    """One page of the current ownership's commands, newest first, and its page request."""
    device = await commands.owned_device(runtime, user_id, serial_number)
    paging = page_request(runtime.settings, page, page_size)
    return await commands.list_commands(runtime, device, paging), paging


# --- readings ------------------------------------------------------------------------------


def moment(text: str | None, field: str) -> datetime | None:
    """A ``since``/``until`` bound: UTC ``YYYY-MM-DD HH:MM:SS`` (absent: None)."""
    if text is None:
        return None
    if _TIMESTAMP.fullmatch(text):
        try:
            return datetime.strptime(text, TIMESTAMP_FORMAT)
        except ValueError:  # a month 13, a 30 February
            pass
    raise InvalidField(field, "must be a UTC time as YYYY-MM-DD HH:MM:SS")


def _bounds(since: str | None, until: str | None) -> tuple[datetime | None, datetime | None]:
    errors: list[FieldError] = []
    bounds = []
    for text, field in ((since, "since"), (until, "until")):
        try:
            bounds.append(moment(text, field))
        except InvalidField as error:
            errors += error.errors or []
    if errors:
        raise InvalidFields(errors)
    return bounds[0], bounds[1]


async def readings_page(
    runtime: Runtime,
    user_id: int,
    serial_number: str,
    *,
    since: str | None,
    until: str | None,
    page: str | None,
    page_size: str | None,
) -> tuple[Page, PageRequest]:
    """One page of the current ownership's readings, newest first; ``since`` inclusive,
    ``until`` exclusive."""
    device = await commands.owned_device(runtime, user_id, serial_number)
    start, end = _bounds(since, until)
    paging = page_request(runtime.settings, page, page_size)
    result = await readings.list_readings(runtime, device, paging, since=start, until=end)
    return result, paging


async def readings_summary(
    runtime: Runtime,
    user_id: int,
    serial_number: str,
    *,
    since: str | None,
    until: str | None,
    every: str | None,
) -> tuple[summary.Plan, list[dict[str, Any]]]:
    """The summary's plan (range, buckets, time zone) and its non-empty buckets."""
    device = await commands.owned_device(runtime, user_id, serial_number)
    start, end = _bounds(since, until)
    zone = await owner_time_zone(runtime, user_id)
    chosen = summary.plan(every, zone, start, end, utcnow())
    within = Range(device.controller_id, device.assignment_id, chosen.since, chosen.until)
    buckets = await summary.summarize(
        runtime.database,
        chosen,
        within,
        device_type=device.type,
    )
    return chosen, buckets


async def owner_time_zone(runtime: Runtime, user_id: int) -> ZoneInfo:
    """The profile's time zone; UTC for a profile without one (or one this system lacks)."""
    async with runtime.database.read() as connection:
        profile = await users_repository.find_profile(connection, user_id)
    name = None if profile is None else profile.time_zone
    try:
        return ZoneInfo(name) if name else ZoneInfo("UTC")
    except (ZoneInfoNotFoundError, ValueError):
        return ZoneInfo("UTC")


async def readings_csv(
    runtime: Runtime,
    user_id: int,
    serial_number: str,
    *,
    since: str | None,
    until: str | None,
) -> AsyncIterator[bytes]:
    """The current ownership's readings as CSV, oldest first (the checks run before the
    first byte, so that a refusal is still a problem+json answer)."""
    device = await commands.owned_device(runtime, user_id, serial_number)
    start, end = _bounds(since, until)
    within = Range(
        device.controller_id,
        device.assignment_id,
        start if start is not None else EARLIEST,
        end if end is not None else LATEST,
    )
    return export.csv_lines(runtime.database, within, dialect=runtime.database.dialect_name)


# --- command_log of a controller body -----------------------------------------------------


def command_log(controller_type: str, settings_params: str | None) -> dict[str, Any] | None:
    """A melissa's settings: those of the last ``send_ir_code`` accepted for the current
    owner, whatever became of it (its params, ``settings_params``, read with the controller:
    ``controllers.repository.DETAIL_COLUMNS``), else ``NO_SETTINGS_YET``; None for other
    types."""
    if controller_type != MELISSA:
        return None
    if settings_params is None:
        return dict(NO_SETTINGS_YET)
    params = _decode(settings_params)
    return {name: params.get(name, default) for name, default in NO_SETTINGS_YET.items()}
