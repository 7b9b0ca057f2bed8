"""Queries for controllers and their assignment records. No rules here.

Ownership changes are conditional updates (``WHERE user_id IS NULL`` / ``WHERE user_id =
:caller``): the database decides which of two racing requests wins.
"""

from __future__ import annotations

import functools
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Row,
    and_,
    bindparam,
    case,
    delete,
    func,
    insert,
    select,
    update,
)

from devicecontrol.auth.repository import LIVE_ACCESS_TOKENS, live_access_token
from devicecontrol.database import prepared
from devicecontrol.database.engine import Reader, Writer
from devicecontrol.database.prepared import Prepared
from devicecontrol.database.tables import (
    access_tokens,
    controller_assignments,
    controllers,
    geofences,
    latest_readings,
    schedules,
)
from devicecontrol.devices.catalogue import MELISSA, SEND_IR_CODE
from devicecontrol.devices.commands.repository import last_params_of_current_owner

PUBLIC_COLUMNS = (
    controllers.c.user_id,
    controllers.c.serial_number,
    controllers.c.mac,
    controllers.c.firmware_version,
    controllers.c.name,
    controllers.c.type,
    controllers.c.room_id,
    controllers.c.online,
    controllers.c.brand_id,
)

# A controller body also shows its latest reading of the current ownership (contract §10,
# ``controller_log``): joined into the same statement, so that a list page costs no extra
# query. The partial unique index allows one active record per controller, so the joins
# never repeat a controller.
_ACTIVE_RECORD = and_(
    controller_assignments.c.controller_id == controllers.c.id,
    controller_assignments.c.deleted_at.is_(None),
)
_LATEST_READING = and_(
    latest_readings.c.controller_id == controllers.c.id,
    latest_readings.c.assignment_id == controller_assignments.c.id,
)
_WITH_LOG = controllers.outerjoin(controller_assignments, _ACTIVE_RECORD).outerjoin(
    latest_readings, _LATEST_READING
)
BODY_COLUMNS = (
    *PUBLIC_COLUMNS,
    controllers.c.id,
    controller_assignments.c.id.label("assignment_id"),  # null: no active record
    latest_readings.c.payload.label("log_payload"),  # null: no reading of this ownership
    latest_readings.c.created_at.label("log_created_at"),
)


def _owned_by(user_id: int, *, type_: str | None, mac: str | None) -> list[Any]:
    conditions = [controllers.c.user_id == user_id]
    if type_ is not None:
        conditions.append(controllers.c.type == type_)
    if mac is not None:
        conditions.append(controllers.c.mac == mac)
    return conditions


async def count_owned(
    connection: Reader, user_id: int, *, type_: str | None, mac: str | None
) -> int:
    query = (
        select(func.count())
        .select_from(controllers)
        .where(*_owned_by(user_id, type_=type_, mac=mac))
    )
    return (await connection.execute(query)).scalar_one()


# The hot reads are built once (per filter combination) with bound parameters: building a
# query and its cache key on every call cost more than running it (docs/PERFORMANCE.md).
@functools.cache
def _owned_page_query(*, by_type: bool, by_mac: bool) -> Prepared:
    conditions = [controllers.c.user_id == bindparam("user_id")]
    if by_type:
        conditions.append(controllers.c.type == bindparam("type"))
    if by_mac:
        conditions.append(controllers.c.mac == bindparam("mac"))
    # the total as an uncorrelated subquery: both databases run it once per statement (a
    # window count(*) OVER () made SQLite sort every match in a temporary B-tree: 3x slower)
    total = (
        select(func.count())
        .select_from(controllers)
        .where(*conditions)
        .correlate(None)  # counts every match, never one row of the page
        .scalar_subquery()
    )
    return Prepared(
        select(*BODY_COLUMNS, total.label("total"))
        .select_from(_WITH_LOG)
        .where(*conditions)
        .order_by(controllers.c.id)
        .limit(bindparam("limit"))
        .offset(bindparam("offset"))
    )


async def list_owned(
    connection: Reader,
    user_id: int,
    *,
    type_: str | None,
    mac: str | None,
    limit: int,
    offset: int,
) -> list[Row]:
    """One page of a user's controllers (``BODY_COLUMNS``); each row also carries ``total``,
    the count of all matching ones, taken in the same statement (so on the same snapshot)."""
    query = _owned_page_query(by_type=type_ is not None, by_mac=mac is not None)
    parameters = {"user_id": user_id, "type": type_, "mac": mac, "limit": limit, "offset": offset}
    return list((await prepared.execute(connection, query, parameters)).all())


# The single read also carries a melissa's settings (``_relation.command_log``): the params
# of the last send_ir_code of the current ownership, null for other types.
DETAIL_COLUMNS = (
    *BODY_COLUMNS,
    case(
        (controllers.c.type == MELISSA, last_params_of_current_owner(SEND_IR_CODE)),
        else_=None,
    ).label("settings_params"),
)


def _owned(user_id: Any) -> tuple[ColumnElement[bool], ...]:
    """The caller's controller named ``serial_number``."""
    return (
        controllers.c.serial_number == bindparam("serial_number"),
        controllers.c.user_id == user_id,
    )


_OWNED = Prepared(
    select(*DETAIL_COLUMNS).select_from(_WITH_LOG).where(*_owned(bindparam("user_id")))
)
# the token check and the read in one statement (one round trip): no row, the token is not
# live; a row with no controller, the token is live and the controller not the caller's
_OWNED_WITH_TOKEN = Prepared(
    select(
        access_tokens.c.user_id.label("token_user_id"),
        access_tokens.c.expires_at.label("token_expires_at"),
        *DETAIL_COLUMNS,
    )
    # one flat chain of joins: SQLite would materialize a nested one in a temporary table
    .select_from(
        LIVE_ACCESS_TOKENS.outerjoin(controllers, and_(*_owned(access_tokens.c.user_id)))
        .outerjoin(controller_assignments, _ACTIVE_RECORD)
        .outerjoin(latest_readings, _LATEST_READING)
    )
    .where(*live_access_token())
)


async def find_owned(connection: Reader, user_id: int, serial_number: str) -> Row | None:
    """The caller's controller (``DETAIL_COLUMNS``), or None."""
    parameters = {"serial_number": serial_number, "user_id": user_id}
    return (await prepared.execute(connection, _OWNED, parameters)).first()


async def find_owned_with_token(
    connection: Reader, token_digest: str, now: datetime, *, serial_number: str
) -> Row | None:
    """``token_user_id``, ``token_expires_at`` and the ``DETAIL_COLUMNS`` of the token's
    user's controller (all null when it is not theirs); None when the token is not live."""
    parameters = {"token_digest": token_digest, "now": now, "serial_number": serial_number}
    return (await prepared.execute(connection, _OWNED_WITH_TOKEN, parameters)).first()


async def find_by_serial(
    connection: Reader, serial_number: str, *, lock: bool = False
) -> Row | None:
    """Every column, for the rules of assignment and provisioning.

    ``lock`` holds the row (``FOR UPDATE`` on PostgreSQL) until the transaction ends, so
    that ownership changes of one controller run one after another and each sees the last
    one's outcome. SQLite needs no lock: its write transactions already run one at a time.
    """
    query = select(controllers).where(controllers.c.serial_number == serial_number)
    if lock:
        query = query.with_for_update()
    return (await connection.execute(query)).first()


async def claim_if_unowned(connection: Writer, controller_id: int, user_id: int) -> bool:
    """Give an unowned controller to user_id; False when someone else got it first."""
    result = await connection.execute(
        update(controllers)
        .where(controllers.c.id == controller_id, controllers.c.user_id.is_(None))
        .values(user_id=user_id)
    )
    return result.rowcount == 1


async def transfer_if_owned(
    connection: Writer, controller_id: int, *, from_user_id: int, to_user_id: int
) -> bool:
    """Move a controller between owners (its room stays behind); False if not from_user's."""
    result = await connection.execute(
        update(controllers)
        .where(controllers.c.id == controller_id, controllers.c.user_id == from_user_id)
        .values(user_id=to_user_id, room_id=None)
    )
    return result.rowcount == 1


async def release_if_owned(connection: Writer, controller_id: int, user_id: int) -> bool:
    """Make the owner's controller unowned (and roomless); False if it is not user_id's."""
    result = await connection.execute(
        update(controllers)
        .where(controllers.c.id == controller_id, controllers.c.user_id == user_id)
        .values(user_id=None, room_id=None)
    )
    return result.rowcount == 1


async def delete_automations(connection: Writer, controller_id: int) -> None:
    """Delete the controller's geofences and schedules (contract §12), in the transaction of
    a hand-over or release. Call it before the commands are failed: a schedule firing at
    that moment holds its row until it commits, so its command is there to be failed."""
    for table in (geofences, schedules):
        await connection.execute(delete(table).where(table.c.controller_id == controller_id))


async def find_active_assignment(connection: Writer, controller_id: int) -> Row | None:
    query = select(controller_assignments).where(
        controller_assignments.c.controller_id == controller_id,
        controller_assignments.c.deleted_at.is_(None),
    )
    return (await connection.execute(query)).first()


async def close_active_assignment(connection: Writer, controller_id: int, now: datetime) -> None:
    await connection.execute(
        update(controller_assignments)
        .where(
            controller_assignments.c.controller_id == controller_id,
            controller_assignments.c.deleted_at.is_(None),
        )
        .values(deleted_at=now)
    )


async def close_assignment(connection: Writer, record_id: int, now: datetime) -> Row:
    """Set ``deleted_at`` on one record and return the record as it now stands."""
    result = await connection.execute(
        update(controller_assignments)
        .where(controller_assignments.c.id == record_id)
        .values(deleted_at=now)
        .returning(*controller_assignments.c)
    )
    return result.one()


async def count_assignments(connection: Reader, controller_id: int) -> int:
    query = (
        select(func.count())
        .select_from(controller_assignments)
        .where(controller_assignments.c.controller_id == controller_id)
    )
    return (await connection.execute(query)).scalar_one()


async def list_assignments(
    connection: Reader, controller_id: int, *, limit: int, offset: int
) -> list[Row]:
    """A controller's ownership history, newest record first (ids only ever grow)."""
    query = (
        select(controller_assignments)
        .where(controller_assignments.c.controller_id == controller_id)
        .order_by(controller_assignments.c.id.desc())
        .limit(limit)
        .offset(offset)
    )
    return list((await connection.execute(query)).all())


def assignment_snapshot(
    controller: Any, *, user_id: Any, room_id: Any, now: datetime
) -> dict[str, Any]:
    """The values of a new active record: what it copies of the controller passing to user_id.

    Said once for both ways records are made: ``controller`` is one row (``insert_assignment``)
    or the table's columns, for records made in SQL from many rows at once (the bulk import's
    ``registry_repository.insert_owners_records``).
    """
    return {
        "controller_id": controller.id,
        "user_id": user_id,
        "serial_number": controller.serial_number,
        "mac": controller.mac,
        "firmware_version": controller.firmware_version,
        "name": controller.name,
        "type": controller.type,
        "device_group": controller.device_group,
        "status_push": 0,
        "room_id": room_id,
        "created_at": now,
        "assigned_at": now,
    }


async def insert_assignment(
    connection: Writer,
    controller: Row,
    *,
    user_id: int,
    room_id: int | None,
    now: datetime,
) -> Row:
    """A new active record: a snapshot of the controller as it passes to user_id."""
    values = assignment_snapshot(controller, user_id=user_id, room_id=room_id, now=now)
    result = await connection.execute(
        insert(controller_assignments).values(**values).returning(*controller_assignments.c)
    )
    return result.one()


async def insert_controller(connection: Writer, values: dict[str, Any]) -> Row:
    result = await connection.execute(insert(controllers).values(**values).returning(controllers))
    return result.one()
