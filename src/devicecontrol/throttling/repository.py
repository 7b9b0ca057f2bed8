"""Queries for the throttles' failure rows. No rules here: see throttling.py."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, and_, delete, func, insert, literal, or_, select
from sqlalchemy.sql.selectable import ScalarSelect

from devicecontrol.database.engine import Reader, Writer
from devicecontrol.database.tables import throttle_failures


async def failure_times_of(
    connection: Reader, subjects: Sequence[tuple[str, str, datetime]]
) -> list[tuple[str, str, datetime]]:
    """(scope, subject digest, when) of each subject's failures after its own ``since``
    (one statement for all of them), oldest first."""
    query = (
        select(
            throttle_failures.c.scope,
            throttle_failures.c.subject_digest,
            throttle_failures.c.created_at,
        )
        .where(
            or_(
                *[
                    and_(
                        throttle_failures.c.scope == scope,
                        throttle_failures.c.subject_digest == subject_digest,
                        throttle_failures.c.created_at > since,
                    )
                    for scope, subject_digest, since in subjects
                ]
            )
        )
        .order_by(throttle_failures.c.created_at)
    )
    rows = await connection.execute(query)
    return [(row.scope, row.subject_digest, row.created_at) for row in rows]


def failures_since(scope: Any, subject_digest: Any, since: Any) -> ScalarSelect[int]:
    """How many failures the subject had after ``since`` (values or bind parameters): a
    scalar subquery, for a statement that reads something else beside the throttle."""
    return (
        select(func.count())
        .where(
            throttle_failures.c.scope == scope,
            throttle_failures.c.subject_digest == subject_digest,
            throttle_failures.c.created_at > since,
        )
        .scalar_subquery()
    )


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
