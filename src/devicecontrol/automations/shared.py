"""What geofences and schedules (contract §12) share: their command fields, 0/1 flags, ids,
how many a controller may have, and the owner's controller as it stands inside the
transaction that fires a command.

Both store a command (name and fields) checked against the controller type's catalogue
when written, and make it later as an ordinary command (``devices/commands/service.py``).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
from sqlalchemy import select

from devicecontrol.automations.geofences.schemas import FlagField
from devicecontrol.database.engine import Writer
from devicecontrol.database.tables import controllers, users
from devicecontrol.devices.catalogue import checked_params
from devicecontrol.devices.commands.service import OwnedDevice
from devicecontrol.devices.repository import ACTIVE_ASSIGNMENT
from devicecontrol.errors import Conflict, FieldError, InvalidField, InvalidFields
from devicecontrol.http.fields import field_value

MAX_FIELDS_TEXT = 4096  # a command's fields as JSON text, as a device's payload is bounded
_ID = re.compile(r"[1-9][0-9]{0,9}")  # ASCII digits, no leading zero
MAX_ID = 2**31 - 1  # the id columns are INTEGER: 32 bits on PostgreSQL
_decode = msgspec.json.decode
_encode = msgspec.json.encode
# the most automations of each kind one controller may have (API.md): each firing is a
# command and a transaction, and a page lists them all
MOST_PER_CONTROLLER = {"schedules": 50, "geofences": 20}


def parse_id(text: str) -> int | None:
    """A path's numeric id, or None when it cannot name a row (the caller answers 404)."""
    number = int(text) if _ID.fullmatch(text) else None
    return number if number is not None and number <= MAX_ID else None


def command_fields(body: dict[str, Any], field: str, errors: list[FieldError]) -> dict[str, Any]:
    """``field`` as an object, sent as one or as its JSON text (as the original shows it);
    absent or null: ``{}``. A problem is added to ``errors``."""
    value = body.get(field)
    if value is None:
        return {}
    if isinstance(value, str):
        if len(value) > MAX_FIELDS_TEXT:
            errors.append(FieldError(field, f"must be at most {MAX_FIELDS_TEXT} characters"))
            return {}
        try:
            value = _decode(value) if value.strip() else {}
        except (msgspec.DecodeError, RecursionError):
            errors.append(FieldError(field, "must be an object or its JSON text"))
            return {}
    if not isinstance(value, dict):
        errors.append(FieldError(field, "must be an object or its JSON text"))
        return {}
    return value


def flag(body: dict[str, Any], field: str, default: bool, errors: list[FieldError]) -> bool:
    """A ``FlagField``: 0/1 (``true``/``false`` too); absent or null: ``default``."""
    if body.get(field) is None:
        return default
    value = field_value(body, field, FlagField, errors)
    return default if value is None else bool(value)


def checked_command(
    device_type: str,
    name: Any,
    fields: dict[str, Any],
    *,
    name_field: str,
    fields_field: str,
    errors: list[FieldError],
) -> str:
    """The command's params as stored (JSON text), checked strictly against the catalogue;
    its problems go to ``errors``, a parameter's named ``<fields_field>.<parameter>``."""
    if not isinstance(name, str) or not name:
        errors.append(FieldError(name_field, "is required, a command name"))
        return "{}"
    try:
        params = checked_params(device_type, name, fields, name_field=name_field, strict=True)
    except InvalidFields as refused:
        for error in refused.errors or []:
            named = error.field if error.field == name_field else f"{fields_field}.{error.field}"
            errors.append(FieldError(named[:128], error.message))
        return "{}"
    return _encode(params).decode()


def keeps_its_controller(body: dict[str, Any], serial_number: str, kind: str) -> None:
    """A change may name the automation's controller, but not another one."""
    if "controller_id" in body and body["controller_id"] != serial_number:
        raise InvalidField("controller_id", f"cannot change; make a new {kind}")


def stored_fields(stored: str | None) -> dict[str, Any]:
    return {} if stored is None else _decode(stored)


async def owned_device_now(
    connection: Writer, controller_id: int, user_id: int
) -> OwnedDevice | None:
    """The controller if ``user_id`` owns it now and their account is active, read in the
    caller's transaction: what an automation fires belongs to the ownership in force when
    it fires, and a disabled account's automations fire nothing.

    Call it first in that transaction: it holds the controller row (``FOR SHARE`` on
    PostgreSQL) so that the transaction takes its locks in a hand-over's order, controller
    then automation. Locking the automation's row first deadlocked with a hand-over (its
    ``FOR UPDATE`` of the controller, then the delete of the automations).
    """
    query = (
        select(
            controllers.c.id,
            controllers.c.serial_number,
            controllers.c.type,
            controllers.c.online,
            ACTIVE_ASSIGNMENT.label("assignment_id"),
        )
        .join(users, users.c.id == controllers.c.user_id)
        .where(
            controllers.c.id == controller_id,
            controllers.c.user_id == user_id,
            users.c.disabled_at.is_(None),
        )
        .with_for_update(read=True, of=controllers)
    )
    row = (await connection.execute(query)).first()
    if row is None or row.assignment_id is None:
        return None
    return OwnedDevice(row.id, row.assignment_id, row.type, bool(row.online), row.serial_number)


async def make_room(
    connection: Writer,
    device: OwnedDevice,
    kind: str,
    count: Callable[[Writer, int], Awaitable[int]],
) -> None:
    """Before a new automation of ``kind`` is written: hold the controller (on PostgreSQL a
    concurrent create waits, so two cannot both take the last place; SQLite writes one at
    a time) and refuse one past the kind's limit (409). ``count``: how many it has."""
    held = select(controllers.c.id).where(controllers.c.id == device.controller_id)
    if connection.dialect.name == "postgresql":
        held = held.with_for_update()
    await connection.execute(held)
    most = MOST_PER_CONTROLLER[kind]
    if await count(connection, device.controller_id) >= most:
        raise Conflict(
            f"controller {device.serial_number} has {most} {kind}, the most it may have; "
            "delete one first"
        )
