"""``schedules list``: what fires next, for the operators, narrowed by owner or controller."""

from __future__ import annotations

from typing import Any

from devicecontrol.automations import listing as filters
from devicecontrol.automations.schedules import repository, timing
from devicecontrol.runtime import Runtime


def _next_command(row: Any) -> str | None:
    if row.next_kind is None:
        return None
    name: str | None = row.command_name if row.next_kind == timing.START else row.end_command_name
    return name


def _record(row: Any) -> dict[str, Any]:
    """A schedule as the listing shows it: its next firing in UTC and in its own zone."""
    local = None
    zone = timing.zone(row.time_zone)
    if row.next_fire_at is not None and zone is not None:
        local = timing.as_aware_utc(row.next_fire_at).astimezone(zone).strftime("%a %H:%M")
    return {
        "next_fire_at": row.next_fire_at,
        "next_local": local,
        "next_command": _next_command(row),
        "serial_number": row.serial_number,
        "owner": row.username,
        "id": row.id,
        "days": row.days,
        "from_time": row.from_time,
        "to_time": row.to_time,
        "time_zone": row.time_zone,
        "active": bool(row.active),
        "last_fired_at": row.last_fired_at,
        "last_command_id": row.last_command_id,
    }


async def list_schedules(
    runtime: Runtime, *, owner: str | None, serial_number: str | None, limit: int
) -> tuple[list[dict[str, Any]], int]:
    """The first ``limit`` matching schedules by next firing (inactive ones last), and how
    many match."""
    filters.check_filters(owner, serial_number)
    async with runtime.database.read() as connection:
        owner_id = await filters.owner_id(connection, owner)
        rows, total = await repository.list_upcoming(
            connection, owner_id=owner_id, serial_number=serial_number, limit=limit
        )
    return [_record(row) for row in rows], total
