"""The events' log (events/log.py) on a real database, SQLite and PostgreSQL: positions in
order, and the trim that keeps EVENT_RETENTION and always the newest event."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import asyncpg
from sqlalchemy import select, update
from sqlalchemy.engine import make_url

from devicecontrol.clock import utcnow
from devicecontrol.database.tables import events
from devicecontrol.events import log
from tests.conftest import POSTGRESQL_ONLY


async def positions(runtime) -> list[int]:
    async with runtime.database.read() as connection:
        return [
            row.id for row in await connection.execute(select(events.c.id).order_by(events.c.id))
        ]


async def test_append_returns_the_newest_position_and_logs_in_order(runtime):
    async with runtime.database.write() as connection:
        assert await log.append(connection, []) is None
        first = await log.append(connection, [log.online(1, "P-1", True)])
    async with runtime.database.write() as connection:
        newest = await log.append(
            connection, [log.online(1, "P-1", False), log.online(2, "P-2", True)]
        )
    assert first is not None and newest == first + 2
    assert await positions(runtime) == [first, first + 1, first + 2]


async def test_the_trim_keeps_the_retention_and_the_newest_event_in_short_batches(runtime):
    async with runtime.database.write() as connection:
        await log.append(connection, [log.online(1, "P-1", n % 2 == 0) for n in range(7)])
    kept = await positions(runtime)
    old = utcnow() - log.EVENT_RETENTION - timedelta(seconds=1)
    async with runtime.database.write() as connection:  # the 5 oldest, and the newest, aged
        aged = [*kept[:5], kept[-1]]
        await connection.execute(update(events).where(events.c.id.in_(aged)).values(created_at=old))
    async with runtime.database.write() as connection:
        assert await log.purge(connection, limit=3) == 3  # one batch at a time
    async with runtime.database.write() as connection:
        assert await log.purge(connection, limit=3) == 2
    # the two young ones stay, and the newest, however old: a resume from it is no gap
    assert await positions(runtime) == kept[5:]


@POSTGRESQL_ONLY
async def test_on_postgresql_an_event_draws_its_position_only_once_it_holds_the_lock(
    runtime, database_url
):
    """Positions in commit order: while another transaction holds the log's lock, a single
    event's append waits, and the position it draws comes after that transaction's."""
    holder = await asyncpg.connect(make_url(database_url).set(drivername="postgresql")
                                   .render_as_string(hide_password=False))  # fmt: skip
    try:
        transaction = holder.transaction()
        await transaction.start()
        await holder.execute("SELECT pg_advisory_xact_lock($1)", log.APPEND_LOCK)

        async def append_one() -> int | None:
            async with runtime.database.write() as connection:
                return await log.append(connection, [log.online(1, "P-1", True)])

        waiting = asyncio.create_task(append_one())
        await asyncio.sleep(0.5)
        assert not waiting.done()  # it waits for the lock
        held = await holder.fetchval(
            "INSERT INTO events (controller_id, kind, data, created_at)"
            " VALUES (2, 'online', '{}', now()) RETURNING id"
        )
        await transaction.commit()
        assert await asyncio.wait_for(waiting, 10) > held
    finally:
        await holder.close()
