"""Queries for geofences. No rules here; every read is the owner's (``user_id``), but for
the operators' listing (``list_all``)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Row, delete, func, insert, select, update

from devicecontrol.database.engine import Reader, Writer
from devicecontrol.database.tables import controllers, geofences, users

# a geofence as shown: its columns and its controller's serial number (``controller_id``)
_SHOWN = select(
    *geofences.c, controllers.c.serial_number, controllers.c.type.label("controller_type")
).join(controllers, controllers.c.id == geofences.c.controller_id)


async def count_owned(connection: Reader, user_id: int) -> int:
    query = select(func.count()).select_from(geofences).where(geofences.c.user_id == user_id)
    return int((await connection.execute(query)).scalar_one())


async def list_owned(
    connection: Reader, user_id: int, *, limit: int, offset: int
) -> list[Row[Any]]:
    """One page of the user's geofences, oldest first."""
    query = (
        _SHOWN.where(geofences.c.user_id == user_id)
        .order_by(geofences.c.id)
        .limit(limit)
        .offset(offset)
    )
    return list((await connection.execute(query)).all())


async def list_of_controller(
    connection: Reader, user_id: int, controller_id: int
) -> list[Row[Any]]:
    """The user's geofences of one controller, oldest first (at most its limit)."""
    query = _SHOWN.where(
        geofences.c.user_id == user_id, geofences.c.controller_id == controller_id
    ).order_by(geofences.c.id)
    return list((await connection.execute(query)).all())


async def list_all(
    connection: Reader, *, owner_id: int | None, serial_number: str | None, limit: int
) -> tuple[list[Row[Any]], int]:
    """For the operators: every account's geofences, oldest first, with the controller's
    serial and the owner's username; and how many match."""
    conditions: list[Any] = []
    if owner_id is not None:
        conditions.append(geofences.c.user_id == owner_id)
    if serial_number is not None:
        conditions.append(controllers.c.serial_number == serial_number)
    joined = geofences.join(controllers, controllers.c.id == geofences.c.controller_id).join(
        users, users.c.id == geofences.c.user_id
    )
    query = (
        select(*geofences.c, controllers.c.serial_number, users.c.username)
        .select_from(joined)
        .where(*conditions)
        .order_by(geofences.c.id)
        .limit(limit)
    )
    total = select(func.count()).select_from(joined).where(*conditions)
    rows = list((await connection.execute(query)).all())
    return rows, (await connection.execute(total)).scalar_one()


async def find_owned(connection: Reader, user_id: int, geofence_id: int) -> Row[Any] | None:
    query = _SHOWN.where(geofences.c.id == geofence_id, geofences.c.user_id == user_id)
    return (await connection.execute(query)).first()


async def insert_geofence(connection: Writer, values: dict[str, Any]) -> int:
    result = await connection.execute(insert(geofences).values(**values).returning(geofences.c.id))
    return int(result.scalar_one())


async def update_geofence(
    connection: Writer, user_id: int, geofence_id: int, values: dict[str, Any]
) -> bool:
    result = await connection.execute(
        update(geofences)
        .where(geofences.c.id == geofence_id, geofences.c.user_id == user_id)
        .values(**values)
    )
    return result.rowcount == 1


async def delete_geofence(connection: Writer, user_id: int, geofence_id: int) -> bool:
    result = await connection.execute(
        delete(geofences).where(geofences.c.id == geofence_id, geofences.c.user_id == user_id)
    )
    return result.rowcount == 1


async def move_inside(connection: Writer, geofence_id: int, *, was: bool | None, now: bool) -> bool:
    """Store the new inside/outside state if it still is ``was``: of two racing reports of
    one transition, exactly one moves it (and fires)."""
    stored = geofences.c.inside.is_(None) if was is None else geofences.c.inside == was
    result = await connection.execute(
        update(geofences).where(geofences.c.id == geofence_id, stored).values(inside=now)
    )
    return result.rowcount == 1


async def count_of_controller(connection: Reader, controller_id: int) -> int:
    """How many geofences the controller has, whoever made them."""
    query = (
        select(func.count())
        .select_from(geofences)
        .where(geofences.c.controller_id == controller_id)
    )
    return int((await connection.execute(query)).scalar_one())
