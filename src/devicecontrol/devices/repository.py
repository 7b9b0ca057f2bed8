"""Queries for the device link: identity, online, readings and commands. No rules here."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Row, and_, bindparam, func, insert, select, update

from devicecontrol.database import prepared
from devicecontrol.database.engine import Reader, Writer
from devicecontrol.database.prepared import Prepared
from devicecontrol.database.tables import (
    commands,
    controller_assignments,
    controllers,
    latest_readings,
)
from devicecontrol.devices.commands import status as command_status
from devicecontrol.devices.commands.status import EXPIRED, FAILED, QUEUED

UNFINISHED = sorted(command_status.UNFINISHED)

# the active assignment record of a controller: the ownership things are filed under
ACTIVE_ASSIGNMENT = (
    select(controller_assignments.c.id)
    .where(
        controller_assignments.c.controller_id == controllers.c.id,
        controller_assignments.c.deleted_at.is_(None),
    )
    .scalar_subquery()
)


def last_params_of_current_owner(name: str) -> Any:
    """The params of the controller's last command ``name`` under its active assignment
    record, as a column of a statement over ``controllers`` joined with that record."""
    return (
        select(commands.c.params)
        .where(
            commands.c.controller_id == controllers.c.id,
            commands.c.assignment_id == controller_assignments.c.id,
            commands.c.name == name,
        )
        .order_by(commands.c.id.desc())
        .limit(1)
        .scalar_subquery()
    )


# --- identity and online -------------------------------------------------------------------


async def find_device(connection: Reader, serial_number: str) -> Row[Any] | None:
    """What the link needs to know of a device: its keys, type and secret digest."""
    query = select(
        controllers.c.id,
        controllers.c.serial_number,
        controllers.c.type,
        controllers.c.device_secret_digest,
    ).where(controllers.c.serial_number == serial_number)
    return (await connection.execute(query)).first()


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


async def touch_last_seen(connection: Writer, controller_id: int, now: datetime) -> None:
    await connection.execute(
        update(controllers).where(controllers.c.id == controller_id).values(last_seen=now)
    )


async def set_presence(connection: Writer, changes: dict[int, tuple[bool, datetime]]) -> None:
    """Online (with ``last_seen`` = when it connected) or offline, for many at once."""
    online = [{"b_id": cid, "b_at": at} for cid, (is_on, at) in changes.items() if is_on]
    offline = [{"b_id": cid} for cid, (is_on, _) in changes.items() if not is_on]
    if online:
        await connection.execute(
            update(controllers)
            .where(controllers.c.id == bindparam("b_id"))
            .values(online=True, last_seen=bindparam("b_at")),
            online,
        )
    if offline:
        await connection.execute(
            update(controllers).where(controllers.c.id == bindparam("b_id")).values(online=False),
            offline,
        )


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


async def set_everyone_offline(connection: Writer) -> None:
    await connection.execute(
        update(controllers).where(controllers.c.online.is_(True)).values(online=False)
    )


# --- commands ------------------------------------------------------------------------------

COMMAND_COLUMNS = (
    commands.c.id,
    commands.c.public_id,
    commands.c.controller_id,
    commands.c.assignment_id,
    commands.c.name,
    commands.c.params,
    commands.c.status,
    commands.c.created_at,
    commands.c.sent_at,
    commands.c.completed_at,
    commands.c.expires_at,
    commands.c.result,
    commands.c.error,
)


async def count_unfinished(connection: Writer, controller_id: int, now: datetime) -> int:
    query = (
        select(func.count())
        .select_from(commands)
        .where(
            commands.c.controller_id == controller_id,
            commands.c.status.in_(UNFINISHED),
            commands.c.expires_at > now,
        )
    )
    count: int = (await connection.execute(query)).scalar_one()
    return count


async def insert_command(connection: Writer, values: dict[str, Any]) -> Row[Any]:
    result = await connection.execute(insert(commands).values(**values).returning(*COMMAND_COLUMNS))
    return result.one()


async def find_command(connection: Reader, controller_id: int, public_id: str) -> Row[Any] | None:
    query = select(*COMMAND_COLUMNS).where(
        commands.c.controller_id == controller_id, commands.c.public_id == public_id
    )
    return (await connection.execute(query)).first()


async def count_commands(connection: Reader, controller_id: int, assignment_id: int) -> int:
    query = (
        select(func.count())
        .select_from(commands)
        .where(commands.c.controller_id == controller_id, commands.c.assignment_id == assignment_id)
    )
    count: int = (await connection.execute(query)).scalar_one()
    return count


async def list_commands(
    connection: Reader, controller_id: int, assignment_id: int, *, offset: int, limit: int
) -> list[Row[Any]]:
    query = (
        select(*COMMAND_COLUMNS)
        .where(commands.c.controller_id == controller_id, commands.c.assignment_id == assignment_id)
        .order_by(commands.c.id.desc())
        .offset(offset)
        .limit(limit)
    )
    return list(await connection.execute(query))


async def deliverable_commands(
    connection: Reader, controller_id: int, now: datetime
) -> list[Row[Any]]:
    """Queued, or sent without a result, and not expired: in creation order."""
    query = (
        select(*COMMAND_COLUMNS)
        .where(
            commands.c.controller_id == controller_id,
            commands.c.status.in_(UNFINISHED),
            commands.c.expires_at > now,
        )
        .order_by(commands.c.id)
    )
    return list(await connection.execute(query))


async def queued_commands_of(
    connection: Reader, controller_ids: Sequence[int], now: datetime
) -> list[Row[Any]]:
    """Queued, unexpired commands of these controllers, in creation order."""
    if not controller_ids:
        return []
    query = (
        select(*COMMAND_COLUMNS)
        .where(
            commands.c.controller_id.in_(list(controller_ids)),
            commands.c.status == QUEUED,
            commands.c.expires_at > now,
        )
        .order_by(commands.c.id)
    )
    return list(await connection.execute(query))


async def move_command(
    connection: Writer,
    command_id: int,
    *,
    from_statuses: Sequence[str],
    values: dict[str, Any],
    unexpired_at: datetime | None = None,
) -> bool:
    """Change a command only if its status is still one of ``from_statuses`` (and, with
    ``unexpired_at``, it has not expired by then): concurrent changes cannot both win."""
    conditions = [commands.c.id == command_id, commands.c.status.in_(list(from_statuses))]
    if unexpired_at is not None:
        conditions.append(commands.c.expires_at > unexpired_at)
    result = await connection.execute(update(commands).where(and_(*conditions)).values(**values))
    return result.rowcount > 0


async def expire_overdue(
    connection: Writer,
    *,
    from_statuses: Sequence[str],
    now: datetime,
    limit: int | None = None,
) -> int:
    """Persist ``expired`` for commands whose time is up (reads already show it); with
    ``limit``, for at most that many (the purge's short batches).

    The conditions stay on the UPDATE itself, not only in the batch's subquery, so that a
    result stored meanwhile is never overwritten.
    """
    overdue = and_(commands.c.status.in_(list(from_statuses)), commands.c.expires_at <= now)
    condition = overdue
    if limit is not None:
        batch = select(commands.c.id).where(overdue).limit(limit).scalar_subquery()
        condition = and_(overdue, commands.c.id.in_(batch))
    result = await connection.execute(
        update(commands).where(condition).values(status=EXPIRED, completed_at=commands.c.expires_at)
    )
    return result.rowcount


async def fail_unexpired(
    connection: Writer,
    controller_id: int,
    *,
    from_statuses: Sequence[str],
    error: str,
    now: datetime,
) -> int:
    result = await connection.execute(
        update(commands)
        .where(
            commands.c.controller_id == controller_id,
            commands.c.status.in_(list(from_statuses)),
            commands.c.expires_at > now,
        )
        .values(status=FAILED, error=error, completed_at=now)
    )
    return result.rowcount
