"""Purging what no request can use any more: dead tokens and aged-out throttle counters.

Run by ``devicecontrol tokens purge`` and, on a schedule, by every ``serve`` process. Rows
go in small batches, each its own transaction, so that a large purge never holds SQLite's
write lock (or PostgreSQL row locks) for long. Running it in several processes at once is
harmless: each batch deletes what is still there.
"""

from __future__ import annotations

import asyncio
import logging
import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, Table, delete, exists, or_, select

from devicecontrol.clock import utcnow
from devicecontrol.config import Settings
from devicecontrol.db import Database
from devicecontrol.tables import access_tokens, refresh_tokens, throttle_failures

PURGE_BATCH_ROWS = 5000
logger = logging.getLogger("devicecontrol.housekeeping")


@dataclass(frozen=True, slots=True)
class PurgeReport:
    access_tokens: int
    refresh_tokens: int
    throttle_records: int


def _dead(table: Table, now: datetime) -> ColumnElement[bool]:
    return or_(table.c.expires_at <= now, table.c.revoked_at.is_not(None))


def longest_throttle_window(settings: Settings) -> timedelta:
    """Failures older than every rule's window can no longer throttle anybody."""
    rules = (
        settings.throttle_login_per_username,
        settings.throttle_login_per_address,
        settings.throttle_claim_per_controller,
        settings.throttle_claim_per_user,
        settings.throttle_client_per_id,
        settings.throttle_client_per_address,
    )
    return timedelta(seconds=max(rule.window_s for rule in rules))


async def _delete_in_batches(database: Database, table: Table, condition: Any) -> int:
    deleted = 0
    while True:
        batch = select(table.c.id).where(condition).limit(PURGE_BATCH_ROWS).scalar_subquery()
        async with database.write() as connection:
            count = (await connection.execute(delete(table).where(table.c.id.in_(batch)))).rowcount
        deleted += count
        if count < PURGE_BATCH_ROWS:
            return deleted


async def purge(database: Database, settings: Settings, now: datetime | None = None) -> PurgeReport:
    """Delete expired and revoked tokens, then throttle failures past every window.

    A dead refresh token stays while an access token issued from it still lives (a renew
    late in its life can outlast it); it goes in the first purge after that one.
    """
    now = now or utcnow()
    access = await _delete_in_batches(database, access_tokens, _dead(access_tokens, now))
    still_referenced = exists().where(access_tokens.c.refresh_token_id == refresh_tokens.c.id)
    refresh = await _delete_in_batches(
        database, refresh_tokens, _dead(refresh_tokens, now) & ~still_referenced
    )
    cutoff = now - longest_throttle_window(settings)
    throttled = await _delete_in_batches(
        database, throttle_failures, throttle_failures.c.created_at <= cutoff
    )
    return PurgeReport(access_tokens=access, refresh_tokens=refresh, throttle_records=throttled)


async def purge_periodically(database: Database, settings: Settings) -> None:
    """Purge every ``purge_interval_s`` seconds until cancelled; failures are logged, not fatal.

    The first run waits a random part of the interval so that the workers of one deployment
    spread their purges out instead of all starting together.
    """
    interval = settings.purge_interval_s
    await asyncio.sleep(random.uniform(0.5, 1.0) * interval)  # spreads workers out
    while True:
        try:
            report = await purge(database, settings)
            logger.info(
                "purged %d access tokens, %d refresh tokens, %d throttle records",
                report.access_tokens,
                report.refresh_tokens,
                report.throttle_records,
            )
        except Exception:  # a database outage must not end the schedule
            logger.warning("scheduled purge failed; retrying in %d s", interval, exc_info=True)
        await asyncio.sleep(interval)
