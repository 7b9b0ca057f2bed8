"""Queries for the web app's sessions (table ``web_sessions``). No rules here.

A session is a row while it lasts: ending it deletes the row, so a replayed cookie finds
nothing. Only the SHA-256 digest of the cookie's value is stored.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Row, delete, insert, select

from devicecontrol.database.engine import Reader, Writer
from devicecontrol.database.tables import users, web_sessions


async def insert_session(
    connection: Writer, *, digest: str, user_id: int, now: datetime, expires_at: datetime
) -> None:
    await connection.execute(
        insert(web_sessions).values(
            digest=digest, user_id=user_id, created_at=now, expires_at=expires_at
        )
    )


async def find_live_session(connection: Reader, digest: str, now: datetime) -> Row | None:
    """User id and expiry of an unexpired session of an active account."""
    query = (
        select(web_sessions.c.user_id, web_sessions.c.expires_at)
        .join(users, users.c.id == web_sessions.c.user_id)
        .where(
            web_sessions.c.digest == digest,
            web_sessions.c.expires_at > now,
            users.c.disabled_at.is_(None),
        )
    )
    return (await connection.execute(query)).first()


async def delete_session(connection: Writer, digest: str) -> None:
    await connection.execute(delete(web_sessions).where(web_sessions.c.digest == digest))


async def delete_sessions_of_user(connection: Writer, user_id: int) -> None:
    await connection.execute(delete(web_sessions).where(web_sessions.c.user_id == user_id))


async def delete_expired_sessions(connection: Writer, now: datetime, limit: int) -> int:
    """Up to ``limit`` sessions past their expiry (the purge's batches)."""
    expired = (
        select(web_sessions.c.id).where(web_sessions.c.expires_at <= now).limit(limit)
    ).scalar_subquery()
    result = await connection.execute(delete(web_sessions).where(web_sessions.c.id.in_(expired)))
    return result.rowcount
