"""Making a race happen on purpose: hold a transaction open until a rival waits on it.

A test writes a row in a transaction it keeps open, starts the service call that races it,
and commits only once that call is stuck behind the row: the call is then sure to have
looked before the row was committed and to write after, the window a real race hits by luck.
"""

from __future__ import annotations

import asyncio
import time

from sqlalchemy import text

from devicecontrol.database.engine import DatabaseTimedOut
from devicecontrol.runtime import Runtime

LOCK_WAIT_DEADLINE_S = 10.0
_LOCK_WAITERS = text(
    "SELECT count(*) FROM pg_stat_activity "
    "WHERE datname = current_database() AND wait_event_type = 'Lock'"
)


async def until_waiting_on_a_lock(runtime: Runtime, rival: asyncio.Task[object]) -> None:
    """Return once ``rival`` waits for the test's open transaction.

    PostgreSQL: one of this database's sessions waits on a lock. SQLite: writers take turns
    in the process (``Database.write``), so the rival can only queue behind the test's
    transaction and see its row; a few turns of the loop let it reach the queue.
    """
    if runtime.database.is_sqlite:
        await asyncio.sleep(0.05)
        return
    deadline = time.monotonic() + LOCK_WAIT_DEADLINE_S
    while time.monotonic() < deadline:
        assert not rival.done(), "the rival finished without waiting for the open transaction"
        try:
            async with runtime.database.read() as connection:
                if (await connection.execute(_LOCK_WAITERS)).scalar_one() > 0:
                    return
        except DatabaseTimedOut:
            # a new connection took longer than the service's 1 s connect timeout: a busy
            # CI machine, not the race under test; ask again while the deadline allows
            pass
        await asyncio.sleep(0.01)
    raise AssertionError(f"the rival did not wait on a lock within {LOCK_WAIT_DEADLINE_S} s")
