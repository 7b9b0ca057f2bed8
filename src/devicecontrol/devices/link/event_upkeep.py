"""What the device link keeps up besides readings and online: an ``expired`` event as soon
as a command's time is up (reads show ``expired`` at once; the stored status, and its
event, follow within EXPIRE_EVERY_S), a trimmed events' log, and the readings rolled up
by quarter hour for the summaries (``readings/rolling.py``).

All are writes of the link's process, the one writer every deployment has.
"""

from __future__ import annotations

import asyncio

from devicecontrol.clock import utcnow
from devicecontrol.devices.commands import service as commands
from devicecontrol.devices.link.outage import Outage
from devicecontrol.devices.readings import rolling
from devicecontrol.events import log as events_log
from devicecontrol.runtime import Runtime

EXPIRE_EVERY_S = 1.0
PURGE_EVERY_S = 60.0


async def keep_events(runtime: Runtime) -> None:
    """Every EXPIRE_EVERY_S the overdue commands expire and the readings due are rolled up;
    every PURGE_EVERY_S the log sheds what is past its retention. A failure is said once,
    and tried again."""
    outage = Outage(
        "the device link cannot expire commands, trim the events' log or roll readings up;"
        " trying again",
        ended="the device link expires commands, trims the events' log and rolls readings up again",
    )
    since_purge = PURGE_EVERY_S  # trim once at start
    while True:
        try:
            async with runtime.database.write() as connection:
                expired = await commands.expire_overdue(connection, now=utcnow())
            if expired:
                await events_log.announce(runtime.changes)
            if since_purge >= PURGE_EVERY_S:
                since_purge = 0.0
                await _purge(runtime)
            await rolling.roll_up_due(runtime.database)
        except Exception:
            outage.failed()
        else:
            outage.recovered()
        await asyncio.sleep(EXPIRE_EVERY_S)
        since_purge += EXPIRE_EVERY_S


async def _purge(runtime: Runtime) -> None:
    """In short transactions, so that ingest never waits long for SQLite's write lock."""
    while True:
        async with runtime.database.write() as connection:
            purged = await events_log.purge(connection)
        if purged < events_log.PURGE_BATCH:
            return
        await asyncio.sleep(0)
