"""Queries for commands: create, find, list, deliver and move them. No rules here."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Row, and_, func, insert, select, update

from devicecontrol.database.engine import Reader, Writer
from devicecontrol.database.tables import commands, controller_assignments, controllers
from devicecontrol.devices.commands import status as command_status
from devicecontrol.devices.commands.status import EXPIRED, FAILED, QUEUED

UNFINISHED = sorted(command_status.UNFINISHED)


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
) -> Row[Any] | None:
    """Change a command only if its status is still one of ``from_statuses`` (and, with
    ``unexpired_at``, it has not expired by then): concurrent changes cannot both win. The
    command as it now is (for its event, without a read back), or None: not moved."""
    conditions = [commands.c.id == command_id, commands.c.status.in_(list(from_statuses))]
    if unexpired_at is not None:
        conditions.append(commands.c.expires_at > unexpired_at)
    moving = update(commands).where(and_(*conditions)).values(**values)
    return (await connection.execute(moving.returning(*COMMAND_COLUMNS))).first()


async def expire_overdue(
    connection: Writer,
    *,
    from_statuses: Sequence[str],
    now: datetime,
    limit: int | None = None,
) -> list[Row[Any]]:
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
        update(commands)
        .where(condition)
        .values(status=EXPIRED, completed_at=commands.c.expires_at)
        .returning(*COMMAND_COLUMNS)
    )
    return list(result)


async def fail_unexpired(
    connection: Writer,
    controller_id: int,
    *,
    from_statuses: Sequence[str],
    error: str,
    now: datetime,
) -> list[Row[Any]]:
    """The commands it failed, as they now are."""
    result = await connection.execute(
        update(commands)
        .where(
            commands.c.controller_id == controller_id,
            commands.c.status.in_(list(from_statuses)),
            commands.c.expires_at > now,
        )
        .values(status=FAILED, error=error, completed_at=now)
        .returning(*COMMAND_COLUMNS)
    )
    return list(result)
