"""``geofences list``: every account's geofences, for the operators, narrowed by owner or
controller.

Filters are checked before any query, so a typo is an error rather than an empty table.
"""

from __future__ import annotations

from typing import Any

from devicecontrol.automations.geofences import repository
from devicecontrol.controllers import registry_repository
from devicecontrol.controllers.identity import is_serial_number
from devicecontrol.errors import InvalidField
from devicecontrol.runtime import Runtime
from devicecontrol.users.identity import email_problem, username_key


def _record(row: Any) -> dict[str, Any]:
    """A geofence as the listing shows it; ``inside`` is None until the phone reports."""
    return {
        "id": row.id,
        "serial_number": row.serial_number,
        "owner": row.username,
        "latitude": row.latitude,
        "longitude": row.longitude,
        "radius": row.radius,
        "enter_command_name": row.enter_command_name,
        "enter_command_fields": row.enter_command_fields,
        "exit_command_name": row.exit_command_name,
        "exit_command_fields": row.exit_command_fields,
        "active": bool(row.active),
        "enter_push": bool(row.enter_push),
        "exit_push": bool(row.exit_push),
        "inside": None if row.inside is None else bool(row.inside),
        "created_at": row.created_at,
    }


async def list_geofences(
    runtime: Runtime, *, owner: str | None, serial_number: str | None, limit: int
) -> tuple[list[dict[str, Any]], int]:
    """The first ``limit`` matching geofences, oldest first, and how many match."""
    if owner is not None and (problem := email_problem(owner)) is not None:
        raise InvalidField("owner", problem)
    if serial_number is not None and not is_serial_number(serial_number):
        raise InvalidField("serial", "must be 1-64 characters of A-Z a-z 0-9 _ -")
    async with runtime.database.read() as connection:
        owner_id = None
        if owner is not None:
            key = username_key(owner)
            account = (await registry_repository.accounts_by_key(connection, [key])).get(key)
            if account is None:
                raise InvalidField("owner", f"no account is named {owner}")
            owner_id = account.id
        rows, total = await repository.list_all(
            connection, owner_id=owner_id, serial_number=serial_number, limit=limit
        )
    return [_record(row) for row in rows], total
