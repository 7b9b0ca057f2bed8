"""At most STREAMS_PER_USER open streams per user, counted across every process on the
database (a row per open stream); a row whose process died goes stale after STALE_AFTER,
since each process touches its streams' rows every TOUCH_EVERY_S."""

from __future__ import annotations

from collections.abc import Collection
from datetime import timedelta

from devicecontrol.clock import utcnow
from devicecontrol.errors import TooManyRequests
from devicecontrol.events import repository
from devicecontrol.runtime import Runtime

STREAMS_PER_USER = 10
TOUCH_EVERY_S = 20.0
STALE_AFTER = timedelta(seconds=3 * TOUCH_EVERY_S)
RETRY_AFTER_S = 15


async def take(runtime: Runtime, user_id: int) -> int:
    """A slot for a new stream of ``user_id``, or TooManyRequests."""
    now = utcnow()
    fresh_since = now - STALE_AFTER
    async with runtime.database.write() as connection:
        await repository.lock_user(connection, user_id)
        await repository.forget_stale(connection, user_id, fresh_since)
        if await repository.count_open(connection, user_id, fresh_since) >= STREAMS_PER_USER:
            raise TooManyRequests(
                f"At most {STREAMS_PER_USER} event streams per user are open at once; "
                "close one, or try again later.",
                retry_after_s=RETRY_AFTER_S,
            )
        return await repository.insert_open(connection, user_id, now)


async def give_back(runtime: Runtime, slot_ids: Collection[int]) -> None:
    if slot_ids:
        async with runtime.database.write() as connection:
            await repository.delete_open(connection, slot_ids)


async def touch(runtime: Runtime, slot_ids: Collection[int]) -> None:
    if slot_ids:
        async with runtime.database.write() as connection:
            await repository.touch_open(connection, slot_ids, utcnow())
