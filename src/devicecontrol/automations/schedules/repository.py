"""Queries for schedules. No rules here.

A firing is claimed by moving the schedule's ``(next_fire_at, next_kind)`` on from the
value it was read with, in a conditional UPDATE: of any number of processes that read the
same due firing, exactly one moves it (the others match no row), and the command is made in
the same transaction, so a firing is made once or, rolled back, not at all.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Row, delete, func, insert, select, update

from devicecontrol.database.engine import Reader, Writer
from devicecontrol.database.tables import controllers, countries, schedules, users

# a schedule as shown: its columns and its controller's serial number and type
_SHOWN = select(
    *schedules.c, controllers.c.serial_number, controllers.c.type.label("controller_type")
).join(controllers, controllers.c.id == schedules.c.controller_id)


def _owned(user_id: int, controller_id: int | None) -> list[Any]:
    conditions = [schedules.c.user_id == user_id]
    if controller_id is not None:
        conditions.append(schedules.c.controller_id == controller_id)
    return conditions


async def count_owned(connection: Reader, user_id: int, controller_id: int | None) -> int:
    query = select(func.count()).select_from(schedules).where(*_owned(user_id, controller_id))
    return int((await connection.execute(query)).scalar_one())


async def list_owned(
    connection: Reader, user_id: int, controller_id: int | None, *, limit: int, offset: int
) -> list[Row[Any]]:
    """One page of the user's schedules (of one controller, or all), oldest first."""
    query = (
        _SHOWN.where(*_owned(user_id, controller_id))
        .order_by(schedules.c.id)
        .limit(limit)
        .offset(offset)
    )
    return list((await connection.execute(query)).all())


async def find_owned(
    connection: Reader, user_id: int, controller_id: int, schedule_id: int
) -> Row[Any] | None:
    query = _SHOWN.where(*_owned(user_id, controller_id), schedules.c.id == schedule_id)
    return (await connection.execute(query)).first()


async def profile_time_zone(connection: Reader, user_id: int) -> str | None:
    """The time zone of the user's country record (its city's), or None without one."""
    query = (
        select(countries.c.time_zone)
        .select_from(users.join(countries, countries.c.id == users.c.country_id))
        .where(users.c.id == user_id)
    )
    return (await connection.execute(query)).scalar_one_or_none()


async def insert_schedule(connection: Writer, values: dict[str, Any]) -> int:
    result = await connection.execute(insert(schedules).values(**values).returning(schedules.c.id))
    return int(result.scalar_one())


async def update_schedule(connection: Writer, schedule_id: int, values: dict[str, Any]) -> bool:
    result = await connection.execute(
        update(schedules).where(schedules.c.id == schedule_id).values(**values)
    )
    return result.rowcount == 1


async def delete_schedule(connection: Writer, schedule_id: int) -> bool:
    result = await connection.execute(delete(schedules).where(schedules.c.id == schedule_id))
    return result.rowcount == 1


# --- the runner ---------------------------------------------------------------------------


async def due(connection: Reader, now: datetime, *, limit: int) -> list[Row[Any]]:
    """Active schedules whose next firing is at or before ``now``, earliest first."""
    query = (
        select(schedules)
        .where(schedules.c.active.is_(True), schedules.c.next_fire_at <= now)
        .order_by(schedules.c.next_fire_at, schedules.c.id)
        .limit(limit)
    )
    return list((await connection.execute(query)).all())


async def earliest_firing(connection: Reader) -> datetime | None:
    query = select(func.min(schedules.c.next_fire_at)).where(schedules.c.active.is_(True))
    earliest: datetime | None = (await connection.execute(query)).scalar_one()
    return earliest


async def claim_firing(
    connection: Writer,
    schedule_id: int,
    *,
    at: datetime,
    kind: str,
    next_at: datetime | None,
    next_kind: str | None,
) -> bool:
    """Move the schedule from the firing (``at``, ``kind``) to the next one; False when
    another process did first (or the schedule changed or went)."""
    result = await connection.execute(
        update(schedules)
        .where(
            schedules.c.id == schedule_id,
            schedules.c.next_fire_at == at,
            schedules.c.next_kind == kind,
        )
        .values(next_fire_at=next_at, next_kind=next_kind)
    )
    return result.rowcount == 1


async def record_firing(
    connection: Writer, schedule_id: int, *, fired_at: datetime, command_id: str
) -> None:
    await connection.execute(
        update(schedules)
        .where(schedules.c.id == schedule_id)
        .values(last_fired_at=fired_at, last_command_id=command_id)
    )


async def list_upcoming(
    connection: Reader, *, owner_id: int | None, serial_number: str | None, limit: int
) -> tuple[list[Row[Any]], int]:
    """For the operators: schedules by their next firing (none last), with the
    controller's serial and the owner's username; and how many match."""
    conditions: list[Any] = []
    if owner_id is not None:
        conditions.append(schedules.c.user_id == owner_id)
    if serial_number is not None:
        conditions.append(controllers.c.serial_number == serial_number)
    joined = schedules.join(controllers, controllers.c.id == schedules.c.controller_id).join(
        users, users.c.id == schedules.c.user_id
    )
    query = (
        select(*schedules.c, controllers.c.serial_number, users.c.username)
        .select_from(joined)
        .where(*conditions)
        .order_by(schedules.c.next_fire_at.is_(None), schedules.c.next_fire_at, schedules.c.id)
        .limit(limit)
    )
    total = select(func.count()).select_from(joined).where(*conditions)
    rows = list((await connection.execute(query)).all())
    return rows, (await connection.execute(total)).scalar_one()


async def count_of_controller(connection: Reader, controller_id: int) -> int:
    """How many schedules the controller has, whoever made them."""
    query = (
        select(func.count())
        .select_from(schedules)
        .where(schedules.c.controller_id == controller_id)
    )
    return int((await connection.execute(query)).scalar_one())
