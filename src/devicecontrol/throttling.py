"""Failure counters in the database, shared by every server process.

A failure (wrong password, wrong claim code) is one row; a subject with ``limit`` rows
inside the rule's window gets 429 until the oldest of them ages out. Checks run before the
costly or guessable step, so a throttled caller learns nothing more.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from sqlalchemy import delete, insert, select
from sqlalchemy.ext.asyncio import AsyncConnection

from devicecontrol.auth.tokens import digest
from devicecontrol.config import ThrottleRule
from devicecontrol.errors import TooManyRequests
from devicecontrol.tables import throttle_failures

LOGIN_USERNAME = "login_username"
LOGIN_ADDRESS = "login_address"
CLAIM_CONTROLLER = "claim_controller"
CLAIM_USER = "claim_user"

Subject = tuple[str, str]  # (scope, subject)


async def _seconds_until_allowed(
    connection: AsyncConnection, subject: Subject, rule: ThrottleRule, now: datetime
) -> int:
    """0 when another attempt is allowed, else how long until enough failures age out."""
    scope, name = subject
    window_start = now - timedelta(seconds=rule.window_s)
    query = (
        select(throttle_failures.c.created_at)
        .where(
            throttle_failures.c.scope == scope,
            throttle_failures.c.subject_digest == digest(name),
            throttle_failures.c.created_at > window_start,
        )
        .order_by(throttle_failures.c.created_at)
    )
    failures = list((await connection.execute(query)).scalars())
    if len(failures) < rule.limit:
        return 0
    frees_a_slot = failures[len(failures) - rule.limit]
    return max(1, int((frees_a_slot + timedelta(seconds=rule.window_s) - now).total_seconds()) + 1)


async def ensure_allowed(
    connection: AsyncConnection,
    checks: Sequence[tuple[Subject, ThrottleRule]],
    now: datetime,
    *,
    what: str,
) -> None:
    """Raise TooManyRequests when any subject has used up its failures."""
    wait = 0
    for subject, rule in checks:
        wait = max(wait, await _seconds_until_allowed(connection, subject, rule, now))
    if wait:
        raise TooManyRequests(f"Too many failed {what}; try again later.", retry_after_s=wait)


async def record_failures(
    connection: AsyncConnection, subjects: Sequence[Subject], now: datetime
) -> None:
    await connection.execute(
        insert(throttle_failures),
        [{"scope": s, "subject_digest": digest(n), "created_at": now} for s, n in subjects],
    )


async def clear_failures(connection: AsyncConnection, subject: Subject) -> None:
    scope, name = subject
    await connection.execute(
        delete(throttle_failures).where(
            throttle_failures.c.scope == scope,
            throttle_failures.c.subject_digest == digest(name),
        )
    )
