"""Rolling readings up by quarter hour, in the background, so that a month's summary reads
2,880 rollups instead of 43,200 readings (docs/DESIGN.md, "Readings summary").

The device link does it (the one writer every deployment has), a quarter hour once it
ended SETTLE_S ago: at once when it holds at most READINGS_AT_ONCE readings, else
CONTROLLERS_AT_ONCE controllers per transaction, so that ingest never waits long for
SQLite's write lock; and for at most BUDGET_S of each call: a database
upgraded with months of history catches up over hours, never all at once. A summary
checks each rollup against the readings the table holds and reads the readings instead
where they differ, so a reading stored late, or purged, never makes a summary wrong.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta

from devicecontrol.clock import utcnow
from devicecontrol.database.engine import Database
from devicecontrol.devices.readings import rollups
from devicecontrol.devices.readings.aggregates import PERIOD_S, quarter_hour_of

PERIOD = timedelta(seconds=PERIOD_S)
SETTLE_S = 60  # a quarter hour's readings are all stored this long after it ends
CONTROLLERS_AT_ONCE = 500  # per transaction, in a quarter hour of many readings
READINGS_AT_ONCE = 20_000  # a quarter hour with no more than this is rolled up at once
BUDGET_S = 0.25


async def roll_up_due(database: Database, *, now: datetime | None = None) -> int:
    """Roll up what is due, within BUDGET_S; returns how many blocks were rolled."""
    now = now or utcnow()
    settled = now - timedelta(seconds=SETTLE_S)
    started, blocks = time.monotonic(), 0
    while time.monotonic() - started < BUDGET_S:
        async with database.write() as connection:
            place = await rollups.progress(connection)
            if place is None:
                first = await rollups.first_reading_at(connection)
                start = quarter_hour_of(first if first is not None else now)
                await rollups.save_progress(connection, start, 0, first=True)
                place = (start, 0)
            start, next_controller = place
            if next_controller == 0:  # a new quarter hour: skip the stretches nobody reported
                following = await rollups.next_reading_at(connection, start)
                if following is None or quarter_hour_of(following) > start:
                    start = min(quarter_hour_of(following or now), quarter_hour_of(settled))
                    await rollups.save_progress(connection, start, 0)
            if start + PERIOD > settled:
                return blocks
            newest = await rollups.last_controller_id(connection)
            if next_controller > newest:  # this quarter hour is done: on to the next
                await rollups.save_progress(connection, start + PERIOD, 0)
                continue
            last = next_controller + CONTROLLERS_AT_ONCE - 1
            if next_controller == 0:
                held = await rollups.readings_between(connection, start, start + PERIOD)
                if held <= READINGS_AT_ONCE:
                    last = newest
            await rollups.roll_up(
                connection, start, start + PERIOD, (next_controller, last), database.dialect_name
            )
            if last >= newest:  # this quarter hour is done: on to the next
                await rollups.save_progress(connection, start + PERIOD, 0)
            else:
                await rollups.save_progress(connection, start, last + 1)
            blocks += 1
    return blocks
