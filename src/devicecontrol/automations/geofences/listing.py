"""``geofences list``: every account's geofences, for the operators, narrowed by owner or
controller.
"""

from __future__ import annotations

from typing import Any

from devicecontrol.automations import listing as filters
from devicecontrol.automations.geofences import repository
from devicecontrol.runtime import Runtime


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
    filters.check_filters(owner, serial_number)
    async with runtime.database.read() as connection:
        owner_id = await filters.owner_id(connection, owner)
        rows, total = await repository.list_all(
            connection, owner_id=owner_id, serial_number=serial_number, limit=limit
        )
    return [_record(row) for row in rows], total
