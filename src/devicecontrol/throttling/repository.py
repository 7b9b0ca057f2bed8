"""Queries for the throttles' failure rows. No rules here: see throttling.py."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import BigInteger, delete, func, insert, literal, select

from devicecontrol.database.engine import Reader, Writer
from devicecontrol.database.tables import throttle_failures


async def failure_times(
    connection: Reader, scope: str, subject_digest: str, *, since: datetime
) -> list[datetime]:
    """When the subject failed after ``since``, oldest first."""
    query = (
        select(throttle_failures.c.created_at)
        .where(
            throttle_failures.c.scope == scope,
            throttle_failures.c.subject_digest == subject_digest,
            throttle_failures.c.created_at > since,
        )
        .order_by(throttle_failures.c.created_at)
    )
    return list((await connection.execute(query)).scalars())


async def lock_keys(connection: Writer, keys: Sequence[int]) -> None:
    """PostgreSQL transaction-scoped advisory locks on these keys, in the order given."""
    for key in keys:
        await connection.execute(select(func.pg_advisory_xact_lock(literal(key, BigInteger))))


async def insert_failure(connection: Writer, scope: str, subject_digest: str, now: datetime) -> int:
    result = await connection.execute(
        insert(throttle_failures)
        .values(scope=scope, subject_digest=subject_digest, created_at=now)
        .returning(throttle_failures.c.id)
    )
    return int(result.scalar_one())


async def delete_failures(connection: Writer, failure_ids: Sequence[int]) -> None:
    await connection.execute(
        delete(throttle_failures).where(throttle_failures.c.id.in_(failure_ids))
    )


async def delete_failures_of(connection: Writer, scope: str, subject_digest: str) -> None:
    await connection.execute(
        delete(throttle_failures).where(
            throttle_failures.c.scope == scope,
            throttle_failures.c.subject_digest == subject_digest,
        )
    )
