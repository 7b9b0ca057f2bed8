"""Failure counters in the database, shared by every server process.

A failure (wrong password, wrong claim code) is one row; a subject with ``limit`` rows
inside the rule's window gets 429 until the oldest of them ages out. Checks run before the
costly or guessable step, so a throttled caller learns nothing more.

The check and the recording of the attempt's failure happen in one write transaction,
one request after another per subject (SQLite's write lock; a transaction-scoped advisory
lock per subject on PostgreSQL). Otherwise concurrent guesses, on one process or several,
would all pass the check before any of them had recorded its failure.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, bindparam, false, or_

from devicecontrol.auth.tokens import digest
from devicecontrol.config import ThrottleRule
from devicecontrol.database.engine import Reader, Writer
from devicecontrol.errors import TooManyRequests
from devicecontrol.observability.metrics import THROTTLED
from devicecontrol.throttling import repository as throttle_repository

LOGIN_USERNAME = "login_username"
LOGIN_ADDRESS = "login_address"
CLAIM_CONTROLLER = "claim_controller"
CLAIM_USER = "claim_user"
CLIENT_ID = "client_id"
CLIENT_ADDRESS = "client_address"

Subject = tuple[str, str]  # (scope, subject)


def _seconds_until_allowed(failures: list[datetime], rule: ThrottleRule, now: datetime) -> int:
    """0 when another attempt is allowed, else how long until enough failures age out."""
    if len(failures) < rule.limit:
        return 0
    frees_a_slot = failures[len(failures) - rule.limit]
    return max(1, int((frees_a_slot + timedelta(seconds=rule.window_s) - now).total_seconds()) + 1)


async def _lock_subjects(connection: Writer, subjects: Sequence[Subject]) -> None:
    """Hold the subjects until the transaction ends, so their checks run one at a time.

    SQLite write transactions are already one at a time. The PostgreSQL locks are taken in
    one global order, so two requests locking overlapping subjects cannot deadlock.
    """
    if connection.dialect.name != "postgresql":
        return
    # 60 bits of the digest: a positive bigint
    keys = sorted({int(digest(f"{scope}:{name}")[:15], 16) for scope, name in subjects})
    await throttle_repository.lock_keys(connection, keys)


async def ensure_allowed(
    connection: Writer,
    checks: Sequence[tuple[Subject, ThrottleRule]],
    now: datetime,
    *,
    what: str,
) -> None:
    """Raise TooManyRequests when any subject has used up its failures.

    Call it in a write transaction and record the attempt's failures in the same one: the
    subjects stay locked until it ends.
    """
    await _lock_subjects(connection, [subject for subject, _ in checks])
    wait = await seconds_until_allowed(connection, checks, now)
    if wait:
        THROTTLED.labels(what).inc()
        raise TooManyRequests(f"Too many failed {what}; try again later.", retry_after_s=wait)


async def seconds_until_allowed(
    connection: Reader, checks: Sequence[tuple[Subject, ThrottleRule]], now: datetime
) -> int:
    """0 when every subject may try again, else how long until all of them may (one
    statement). ``ensure_allowed``'s check, under its locks."""
    if not checks:
        return 0
    digests = [(scope, digest(name)) for (scope, name), _ in checks]
    asked = [
        (scope, subject_digest, now - timedelta(seconds=rule.window_s))
        for (scope, subject_digest), (_, rule) in zip(digests, checks, strict=True)
    ]
    failures: dict[tuple[str, str], list[datetime]] = {key: [] for key in digests}
    for scope, subject_digest, when in await throttle_repository.failure_times_of(
        connection, asked
    ):
        failures[(scope, subject_digest)].append(when)
    return max(
        _seconds_until_allowed(failures[key], rule, now)
        for key, (_, rule) in zip(digests, checks, strict=True)
    )


def over_limit(subjects: int) -> ColumnElement[bool]:
    """Whether any of ``subjects`` subjects has used up its failures, as an expression
    with bind parameters (``over_limit_parameters`` gives their values), for a statement
    prepared once that reads something else too (a device's connect: its secret and its
    throttle in one read, and nothing written when it succeeds). Without the locks of
    ``ensure_allowed``, failures racing each other may pass the limit by as many as race.
    False for no subjects."""
    if not subjects:
        return false()
    return or_(
        *[
            throttle_repository.failures_since(
                bindparam(f"throttle_{n}_scope"),
                bindparam(f"throttle_{n}_subject"),
                bindparam(f"throttle_{n}_since"),
            )
            >= bindparam(f"throttle_{n}_limit")
            for n in range(subjects)
        ]
    )


def over_limit_parameters(
    checks: Sequence[tuple[Subject, ThrottleRule]], now: datetime
) -> dict[str, Any]:
    """The values of ``over_limit(len(checks))``'s parameters."""
    parameters: dict[str, Any] = {}
    for n, ((scope, name), rule) in enumerate(checks):
        parameters[f"throttle_{n}_scope"] = scope
        parameters[f"throttle_{n}_subject"] = digest(name)
        parameters[f"throttle_{n}_since"] = now - timedelta(seconds=rule.window_s)
        parameters[f"throttle_{n}_limit"] = rule.limit
    return parameters


async def record_failures(
    connection: Writer, subjects: Sequence[Subject], now: datetime
) -> list[int]:
    """One failure row per subject; their ids, for ``forget_failures``."""
    return [
        await throttle_repository.insert_failure(connection, scope, digest(name), now)
        for scope, name in subjects
    ]


async def forget_failures(connection: Writer, failure_ids: Sequence[int]) -> None:
    """Remove failures recorded in advance for an attempt that then succeeded."""
    await throttle_repository.delete_failures(connection, failure_ids)


async def clear_failures(connection: Writer, subject: Subject) -> None:
    scope, name = subject
    await throttle_repository.delete_failures_of(connection, scope, digest(name))
