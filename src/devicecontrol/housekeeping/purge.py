"""Purging what no request can use any more: dead tokens, aged-out throttle counters and
readings past their retention; and storing ``expired`` for overdue commands.

Run by ``devicecontrol tokens purge`` and, on a schedule, by every ``serve`` process. Rows
go in small batches, each its own transaction, so that a large purge never holds SQLite's
write lock (or PostgreSQL row locks) for long. Running it in several processes at once is
harmless: each batch deletes (or expires) what is still there.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from devicecontrol.auth import web_sessions
from devicecontrol.clock import utcnow
from devicecontrol.config import Settings
from devicecontrol.database.engine import Database, Writer
from devicecontrol.devices.commands import service as commands
from devicecontrol.devices.readings import repository as readings_repository
from devicecontrol.devices.readings import rollups
from devicecontrol.events import log as events_log
from devicecontrol.housekeeping import repository

PURGE_BATCH_ROWS = 5000
logger = logging.getLogger("devicecontrol.housekeeping")


@dataclass(frozen=True, slots=True)
class PurgeReport:
    access_tokens: int
    refresh_tokens: int
    throttle_records: int
    readings: int = 0  # older than the retention, never a controller's latest
    expired_commands: int = 0  # overdue commands whose ``expired`` is now stored


def longest_throttle_window(settings: Settings) -> timedelta:
    """Failures older than every rule's window can no longer throttle anybody."""
    rules = (
        settings.throttle_login_per_username,
        settings.throttle_login_per_address,
        settings.throttle_claim_per_controller,
        settings.throttle_claim_per_user,
        settings.throttle_client_per_id,
        settings.throttle_client_per_address,
        settings.throttle_device_per_serial,
        settings.throttle_device_per_address,
    )
    return timedelta(seconds=max(rule.window_s for rule in rules))


DeleteBatch = Callable[[Writer, int], Awaitable[int]]


async def _delete_in_batches(database: Database, delete_batch: DeleteBatch) -> int:
    """Batches of ``PURGE_BATCH_ROWS``, each its own transaction, until one comes up short.

    ``delete_batch`` returns how many rows it handled, at most the limit it is given.
    """
    deleted = 0
    while True:
        async with database.write() as connection:
            count = await delete_batch(connection, PURGE_BATCH_ROWS)
        deleted += count
        if count < PURGE_BATCH_ROWS:
            return deleted


def reading_cutoff(settings: Settings, now: datetime) -> datetime:
    """Readings that arrived before this are past ``DEVICECONTROL_READING_RETENTION``."""
    return now - timedelta(days=settings.reading_retention_days)


async def purge(database: Database, settings: Settings, now: datetime | None = None) -> PurgeReport:
    """Delete expired and revoked tokens, expired web-app sessions, throttle failures past
    every window and readings past the retention; store ``expired`` for overdue commands.

    A dead refresh token stays while an access token issued from it still lives (a renew
    late in its life can outlast it); it goes in the first purge after that one. A
    controller's latest reading stays however old it is: it is what reads show.
    """
    now = now or utcnow()
    cutoff = now - longest_throttle_window(settings)
    old_readings = reading_cutoff(settings, now)
    access = await _delete_in_batches(
        database, lambda c, limit: repository.delete_dead_access_tokens(c, now, limit=limit)
    )
    # after the access tokens: a refresh token goes once none issued from it is left
    refresh = await _delete_in_batches(
        database,
        lambda c, limit: repository.delete_dead_unreferenced_refresh_tokens(c, now, limit=limit),
    )
    # the web app's sessions past their expiry (an ended one is deleted when it ends)
    await _delete_in_batches(
        database, lambda c, limit: web_sessions.delete_expired_sessions(c, now, limit)
    )
    throttled = await _delete_in_batches(
        database, lambda c, limit: repository.delete_throttle_failures(c, until=cutoff, limit=limit)
    )
    readings = await _delete_in_batches(
        database,
        lambda c, limit: readings_repository.delete_readings_before(c, old_readings, limit),
    )
    # the quarter hours rolled up from them (a summary no longer reads them anyway)
    await _delete_in_batches(
        database, lambda c, limit: rollups.delete_rollups_before(c, old_readings, limit)
    )
    # not a delete, but the same loop: each batch stores ``expired`` for up to ``limit``
    expired = await _delete_in_batches(
        database, lambda c, limit: commands.expire_overdue(c, now=now, limit=limit)
    )
    # the events' log, which the device link also trims every minute (a service without
    # a link has only its commands' events)
    await _delete_in_batches(database, lambda c, limit: events_log.purge(c, now=now, limit=limit))
    return PurgeReport(
        access_tokens=access,
        refresh_tokens=refresh,
        throttle_records=throttled,
        readings=readings,
        expired_commands=expired,
    )


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
                "purged %d access tokens, %d refresh tokens, %d throttle records, %d readings; "
                "stored expired for %d commands",
                report.access_tokens,
                report.refresh_tokens,
                report.throttle_records,
                report.readings,
                report.expired_commands,
            )
        except Exception:  # a database outage must not end the schedule
            logger.warning("scheduled purge failed; retrying in %d s", interval, exc_info=True)
        await asyncio.sleep(interval)
