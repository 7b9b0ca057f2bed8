"""Queries for a device's identity, ownership and online state. No rules here."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, DateTime, Row, bindparam, case, or_, select, update

from devicecontrol.database import prepared
from devicecontrol.database.engine import Reader, Writer
from devicecontrol.database.prepared import Prepared
from devicecontrol.database.tables import (
    controller_assignments,
    controllers,
    latest_readings,
)

# the active assignment record of a controller: the ownership things are filed under
ACTIVE_ASSIGNMENT = (
    select(controller_assignments.c.id)
    .where(
        controller_assignments.c.controller_id == controllers.c.id,
        controller_assignments.c.deleted_at.is_(None),
    )
    .scalar_subquery()
)


async def find_device(connection: Reader, serial_number: str) -> Row[Any] | None:
    """What the link needs to know of a device: its keys, type and secret digest."""
    query = select(
        controllers.c.id,
        controllers.c.serial_number,
        controllers.c.type,
        controllers.c.device_secret_digest,
    ).where(controllers.c.serial_number == serial_number)
    return (await connection.execute(query)).first()


def device_throttled_statement(throttled: ColumnElement[bool]) -> Prepared:
    """``find_device``'s columns and ``throttled`` (bind parameters of its own beside
    ``serial_number``), prepared once: a broker's hook asks thousands of times a second."""
    return Prepared(
        select(
            controllers.c.id,
            controllers.c.serial_number,
            controllers.c.type,
            controllers.c.device_secret_digest,
            throttled.label("throttled"),
        ).where(controllers.c.serial_number == bindparam("serial_number"))
    )


async def find_device_throttled(
    connection: Reader, statement: Prepared, serial_number: str, parameters: dict[str, Any]
) -> tuple[Row[Any], bool] | None:
    """The device and whether its throttle holds, in one statement; None when no device
    has the serial number."""
    arguments = {"serial_number": serial_number, **parameters}
    row = (await prepared.execute(connection, statement, arguments)).first()
    return None if row is None else (row, bool(row.throttled))


_OWNED_DEVICE_COLUMNS = (
    controllers.c.id,
    controllers.c.type,
    controllers.c.online,
    ACTIVE_ASSIGNMENT.label("assignment_id"),
)
_OWNED_DEVICE_CONDITIONS = (
    controllers.c.serial_number == bindparam("serial_number"),
    controllers.c.user_id == bindparam("user_id"),
)
_OWNED_DEVICE = Prepared(select(*_OWNED_DEVICE_COLUMNS).where(*_OWNED_DEVICE_CONDITIONS))
# /provider/fetch, polled by the original clients: the device and its latest reading at once
_OWNED_DEVICE_AND_READING = Prepared(
    select(
        *_OWNED_DEVICE_COLUMNS,
        latest_readings.c.assignment_id.label("reading_assignment_id"),
        latest_readings.c.payload.label("reading_payload"),
    )
    .select_from(
        controllers.outerjoin(latest_readings, latest_readings.c.controller_id == controllers.c.id)
    )
    .where(*_OWNED_DEVICE_CONDITIONS)
)


async def find_owned_device(
    connection: Reader, user_id: int, serial_number: str, *, with_reading: bool = False
) -> Row[Any] | None:
    """The caller's controller with its current ownership (assignment record id); with
    ``with_reading``, its latest reading's ``reading_assignment_id`` and ``reading_payload``
    too (null when it has none)."""
    query = _OWNED_DEVICE_AND_READING if with_reading else _OWNED_DEVICE
    parameters = {"serial_number": serial_number, "user_id": user_id}
    row: Row[Any] | None = (await prepared.execute(connection, query, parameters)).first()
    return row


async def set_device_secret(
    connection: Writer, serial_number: str, secret_digest: str, now: datetime
) -> bool:
    result = await connection.execute(
        update(controllers)
        .where(controllers.c.serial_number == serial_number)
        .values(device_secret_digest=secret_digest, device_secret_changed_at=now)
    )
    return result.rowcount > 0


async def secrets_changed_since(connection: Reader, since: datetime) -> dict[str, Any]:
    """The current secret digest of each controller whose secret changed since then."""
    query = select(controllers.c.serial_number, controllers.c.device_secret_digest).where(
        controllers.c.device_secret_changed_at >= since
    )
    return {row.serial_number: row.device_secret_digest for row in await connection.execute(query)}


async def set_online(
    connection: Writer, controller_id: int, *, online: bool, now: datetime
) -> None:
    await connection.execute(
        update(controllers)
        .where(controllers.c.id == controller_id)
        .values(online=online, last_seen=now)
    )


def seen_not_after(moment: Any) -> ColumnElement[bool]:
    """``last_seen`` is not later than ``moment``: it only moves forward, whichever of
    several link processes stores a device's message first."""
    return or_(controllers.c.last_seen.is_(None), controllers.c.last_seen <= moment)


def _later_last_seen(moment: Any) -> ColumnElement[Any]:
    """``last_seen`` moved to ``moment``, unless it is later already."""
    return case((seen_not_after(moment), moment), else_=controllers.c.last_seen)


async def touch_last_seen(connection: Writer, controller_id: int, now: datetime) -> None:
    await connection.execute(
        update(controllers)
        .where(controllers.c.id == controller_id, seen_not_after(now))
        .values(last_seen=now)
    )


async def set_presence(
    connection: Writer, changes: dict[int, tuple[bool, datetime]]
) -> list[tuple[int, str, bool]]:
    """Online (with ``last_seen`` = when it connected) or offline, for many at once; the
    (id, serial number, online) of those whose ``online`` it changed. The link is the
    only writer of ``online``: what it read here stays true until it commits."""
    if not changes:
        return []
    before = await connection.execute(
        select(controllers.c.id, controllers.c.serial_number, controllers.c.online).where(
            controllers.c.id.in_(sorted(changes))
        )
    )
    changed = [
        (row.id, row.serial_number, changes[row.id][0])
        for row in before
        if bool(row.online) != changes[row.id][0]
    ]
    online = [{"b_id": cid, "b_at": at} for cid, (is_on, at) in changes.items() if is_on]
    offline = [{"b_id": cid} for cid, (is_on, _) in changes.items() if not is_on]
    if online:
        await connection.execute(
            update(controllers)
            .where(controllers.c.id == bindparam("b_id"))
            .values(online=True, last_seen=_later_last_seen(bindparam("b_at", type_=DateTime))),
            online,
        )
    if offline:
        await connection.execute(
            update(controllers).where(controllers.c.id == bindparam("b_id")).values(online=False),
            offline,
        )
    return changed


async def online_devices(connection: Reader) -> list[Row[Any]]:
    """The devices stored as online, as ``find_device`` shows each."""
    query = select(
        controllers.c.id,
        controllers.c.serial_number,
        controllers.c.type,
        controllers.c.device_secret_digest,
    ).where(controllers.c.online.is_(True))
    return list(await connection.execute(query))


async def active_assignment_id(connection: Reader, controller_id: int) -> int | None:
    """The ownership things of this controller are filed under now (None: unowned)."""
    query = select(ACTIVE_ASSIGNMENT).where(controllers.c.id == controller_id)
    return (await connection.execute(query)).scalar_one_or_none()


async def set_everyone_offline(connection: Writer) -> list[tuple[int, str, bool]]:
    """The (id, serial number, False) of each it set offline."""
    result = await connection.execute(
        update(controllers)
        .where(controllers.c.online.is_(True))
        .values(online=False)
        .returning(controllers.c.id, controllers.c.serial_number)
    )
    return [(row.id, row.serial_number, False) for row in result]


async def serial_numbers(connection: Writer, controller_ids: set[int]) -> dict[int, str]:
    query = select(controllers.c.id, controllers.c.serial_number).where(
        controllers.c.id.in_(sorted(controller_ids))
    )
    return {row.id: row.serial_number for row in await connection.execute(query)}
