"""Queries of the purge: dead tokens and old throttle failures, deleted a batch at a time.

No rules here (what may go, and when, is ``housekeeping.py``'s). Each function deletes at
most ``limit`` rows, chosen by id in a subquery so that one batch stays one short statement
on both engines, and returns how many it deleted.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ColumnElement, Table, delete, exists, or_, select

from devicecontrol.database.engine import Writer
from devicecontrol.database.tables import access_tokens, refresh_tokens, throttle_failures


def _expired_or_revoked(table: Table, now: datetime) -> ColumnElement[bool]:
    return or_(table.c.expires_at <= now, table.c.revoked_at.is_not(None))


async def _delete_some(
    connection: Writer, table: Table, condition: ColumnElement[bool], limit: int
) -> int:
    batch = select(table.c.id).where(condition).limit(limit).scalar_subquery()
    result = await connection.execute(delete(table).where(table.c.id.in_(batch)))
    return result.rowcount


async def delete_dead_access_tokens(connection: Writer, now: datetime, *, limit: int) -> int:
    """Access tokens expired or revoked by ``now``."""
    return await _delete_some(
        connection, access_tokens, _expired_or_revoked(access_tokens, now), limit
    )


async def delete_dead_unreferenced_refresh_tokens(
    connection: Writer, now: datetime, *, limit: int
) -> int:
    """Refresh tokens expired or revoked by ``now`` that no access token was issued from."""
    referenced = exists().where(access_tokens.c.refresh_token_id == refresh_tokens.c.id)
    condition = _expired_or_revoked(refresh_tokens, now) & ~referenced
    return await _delete_some(connection, refresh_tokens, condition, limit)


async def delete_throttle_failures(connection: Writer, *, until: datetime, limit: int) -> int:
    """Throttle failures recorded at or before ``until``."""
    condition = throttle_failures.c.created_at <= until
    return await _delete_some(connection, throttle_failures, condition, limit)
