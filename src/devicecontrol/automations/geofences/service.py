"""The rules of geofences (contract §12): the owner's only, commands checked when written,
and a command made only when the phone crosses the fence (with hysteresis) or says so.

Ownership first: a geofence of another account and an unknown one get the same 404, and a
controller that is not the caller's is the usual 404 before the rest of a body is read.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Row

from devicecontrol.automations import shared as automations
from devicecontrol.automations.geofences import repository
from devicecontrol.automations.geofences.schemas import Latitude, LocationRequest, Longitude, Radius
from devicecontrol.clock import utcnow
from devicecontrol.database.engine import Writer
from devicecontrol.database.pages import Page, PageRequest
from devicecontrol.devices import service as devices
from devicecontrol.devices.catalogue import integral
from devicecontrol.devices.commands import service as commands
from devicecontrol.errors import FieldError, InvalidFields, NotFound
from devicecontrol.http.fields import decode_body, field_value
from devicecontrol.runtime import Runtime

HYSTERESIS = 0.1  # of the radius: the phone must be this far past the fence to cross it
EARTH_RADIUS_M = 6_371_008.8  # the mean radius (IUGG)
COMMAND_FIELDS = ("enter_command_name", "exit_command_name")
FLAGS = (("active", True), ("enter_push", False), ("exit_push", False))


@dataclass(frozen=True, slots=True)
class Crossing:
    """What a report did: where the phone now is, and the command made (None: nothing)."""

    inside: bool
    command: Row[Any] | None


def _not_found(geofence_id: str) -> NotFound:
    return NotFound(f"No geofence {geofence_id[:32]} is yours.")


async def list_geofences(runtime: Runtime, user_id: int, paging: PageRequest) -> Page:
    async with runtime.database.read() as connection:
        total = await repository.count_owned(connection, user_id)
        rows = []
        if paging.offset < total:
            rows = await repository.list_owned(
                connection, user_id, limit=paging.page_size, offset=paging.offset
            )
    return Page(rows=rows, total=total, page_count=paging.page_count(total))


async def controller_geofences(
    runtime: Runtime, user_id: int, serial_number: str
) -> list[Row[Any]]:
    """The caller's geofences of their controller (someone else's or an unknown one: 404)."""
    device = await commands.owned_device(runtime, user_id, serial_number)
    async with runtime.database.read() as connection:
        return await repository.list_of_controller(connection, user_id, device.controller_id)


async def get_geofence(runtime: Runtime, user_id: int, geofence_id: str) -> Row[Any]:
    number = automations.parse_id(geofence_id)
    if number is not None:
        async with runtime.database.read() as connection:
            row = await repository.find_owned(connection, user_id, number)
        if row is not None:
            return row
    raise _not_found(geofence_id)


def _values(device_type: str, body: dict[str, Any]) -> dict[str, Any]:
    """Every column a geofence is written with, from a complete body; 400 naming each bad
    field. The place's fields are the documented types (``schemas``); a radius may be sent
    as an integral number (``100.0``)."""
    errors: list[FieldError] = []
    radius = integral(body.get("radius"))
    if radius is not None:
        body = {**body, "radius": radius}
    values: dict[str, Any] = {
        "latitude": field_value(body, "latitude", Latitude, errors),
        "longitude": field_value(body, "longitude", Longitude, errors),
        "radius": field_value(body, "radius", Radius, errors),
    }
    for side in ("enter", "exit"):
        name, fields = f"{side}_command_name", f"{side}_command_fields"
        params = automations.command_fields(body, fields, errors)
        values[name] = body.get(name)
        values[fields] = automations.checked_command(
            device_type, body.get(name), params, name_field=name, fields_field=fields, errors=errors
        )
    for field, default in FLAGS:
        values[field] = automations.flag(body, field, default, errors)
    if errors:
        raise InvalidFields(errors)
    return values


async def create_geofence(runtime: Runtime, user_id: int, body: dict[str, Any]) -> Row[Any]:
    """A geofence of the caller's controller (``controller_id``, its serial number)."""
    device = await devices.device_named_in(runtime, user_id, body, "controller_id")
    values = _values(device.type, body)
    async with runtime.database.write() as connection:
        await automations.make_room(connection, device, "geofences", repository.count_of_controller)
        new_id = await repository.insert_geofence(
            connection,
            {
                **values,
                "controller_id": device.controller_id,
                "user_id": user_id,
                "created_at": utcnow(),
            },
        )
        return await _reread(connection, user_id, new_id)


async def _reread(connection: Writer, user_id: int, geofence_id: int) -> Row[Any]:
    row = await repository.find_owned(connection, user_id, geofence_id)
    assert row is not None  # written in this transaction
    return row


def _as_body(row: Row[Any]) -> dict[str, Any]:
    """A stored geofence as a complete body, for a change to be checked whole."""
    body = {column: getattr(row, column) for column in ("latitude", "longitude", "radius")}
    for side in ("enter", "exit"):
        body[f"{side}_command_name"] = getattr(row, f"{side}_command_name")
        body[f"{side}_command_fields"] = automations.stored_fields(
            getattr(row, f"{side}_command_fields")
        )
    body.update({field: bool(getattr(row, field)) for field, _ in FLAGS})
    return body


async def update_geofence(runtime: Runtime, row: Row[Any], body: dict[str, Any]) -> Row[Any]:
    """Change what the body names of the geofence ``get_geofence`` read; the result is
    checked whole (a new command name with the stored fields). The controller stays."""
    automations.keeps_its_controller(body, row.serial_number, "geofence")
    changed = {name: value for name, value in body.items() if value is not None}
    values = _values(row.controller_type, {**_as_body(row), **changed})
    async with runtime.database.write() as connection:
        if not await repository.update_geofence(connection, row.user_id, row.id, values):
            raise _not_found(str(row.id))  # deleted meanwhile
        return await _reread(connection, row.user_id, row.id)


async def delete_geofence(runtime: Runtime, user_id: int, geofence_id: str) -> Row[Any]:
    """Delete the caller's geofence; its body as it was."""
    row = await get_geofence(runtime, user_id, geofence_id)
    async with runtime.database.write() as connection:
        if not await repository.delete_geofence(connection, user_id, row.id):
            raise _not_found(geofence_id)
    return row


def distance_m(lat1: float, lon1: float, lat2: float, lon2: float) -> float:
    """Great-circle distance (haversine), metres: ample for fences of 50 m and more."""
    phi1, phi2 = math.radians(lat1), math.radians(lat2)
    dphi, dlambda = phi2 - phi1, math.radians(lon2 - lon1)
    a = math.sin(dphi / 2) ** 2 + math.cos(phi1) * math.cos(phi2) * math.sin(dlambda / 2) ** 2
    return 2 * EARTH_RADIUS_M * math.asin(min(1.0, math.sqrt(a)))


def inside_after(was: bool | None, distance: float, radius: float) -> bool:
    """Inside or outside after a report at ``distance`` from the centre. A phone inside
    leaves only past radius + 10 %, one outside enters only within radius - 10 %; the first
    report compares with the radius itself."""
    if was is None:
        return distance <= radius
    if was:
        return distance <= radius * (1 + HYSTERESIS)
    return distance < radius * (1 - HYSTERESIS)


async def report_location(runtime: Runtime, row: Row[Any], body: dict[str, Any]) -> Crossing:
    """The phone's position: on a crossing (not the first report) the enter or exit
    command is made, if the geofence is active."""
    place = decode_body(body, LocationRequest)
    distance = distance_m(row.latitude, row.longitude, place.latitude, place.longitude)
    inside = inside_after(row.inside, distance, row.radius)
    return await _move(runtime, row, inside, direct=False)


async def cross(runtime: Runtime, row: Row[Any], *, entering: bool) -> Crossing:
    """The phone says it entered or left (it geofences itself): the command fires now."""
    return await _move(runtime, row, entering, direct=True)


async def _move(runtime: Runtime, row: Row[Any], inside: bool, *, direct: bool) -> Crossing:
    """Store the state and, on a crossing (or a direct report) of an active geofence, make
    the command in the same transaction: of two racing reports of one crossing, one fires."""
    side = "enter" if inside else "exit"
    async with runtime.database.write() as connection:
        # the controller first, as a hand-over locks it (automations.owned_device_now)
        device = await automations.owned_device_now(connection, row.controller_id, row.user_id)
        if device is None:  # handed over meanwhile: its geofences went with it
            raise _not_found(str(row.id))
        if direct:
            await repository.update_geofence(connection, row.user_id, row.id, {"inside": inside})
            fires = True
        else:  # the first report only says where the phone is: no crossing yet
            moved = await repository.move_inside(connection, row.id, was=row.inside, now=inside)
            fires = moved and row.inside is not None and row.inside != inside
        if not (fires and row.active):
            return Crossing(inside, None)
        command = await commands.insert_queued(
            connection,
            device,
            name=getattr(row, f"{side}_command_name"),
            params=automations.stored_fields(getattr(row, f"{side}_command_fields")),
            ttl_s=runtime.settings.command_ttl_s,
        )
        await commands.log_made(connection, device, command)
    await commands.announce_made(runtime, command)
    return Crossing(inside, command)
