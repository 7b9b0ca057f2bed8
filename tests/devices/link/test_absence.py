"""How long a link was away, across its own death (``absence.py``): the heartbeat its
shard writes, read as it starts again, on both engines."""

from __future__ import annotations

from devicecontrol.config import ThrottleRule
from devicecontrol.devices.link.absence import Absence, _beat
from devicecontrol.devices.link.limits import MessageRate
from devicecontrol.runtime import Runtime


def taken(rate: MessageRate, serial: str, count: int) -> int:
    return sum(rate.allow(serial) for _ in range(count))


async def test_a_first_start_credits_nothing(runtime: Runtime, clock) -> None:
    rate = MessageRate(ThrottleRule(3, 1))
    await Absence(runtime, rate, shard=0).started()
    assert not rate.catching_up
    assert taken(rate, "PLUG-1", 10) == 3


async def test_a_link_started_again_credits_the_time_since_its_shards_heartbeat(
    runtime: Runtime, clock
) -> None:
    async with runtime.database.write() as connection:
        await _beat(connection, 1)
        await _beat(connection, 1)  # an upsert: one row per shard
    clock.advance(20)
    async with runtime.database.write() as connection:
        await _beat(connection, 0)  # another shard's, just now: not this one's
    rate = MessageRate(ThrottleRule(3, 1))
    await Absence(runtime, rate, shard=1).started()
    assert rate.catching_up
    assert taken(rate, "PLUG-1", 100) == 3 + 20 * 3
    other = MessageRate(ThrottleRule(3, 1))
    await Absence(runtime, other, shard=0).started()
    assert taken(other, "PLUG-1", 100) == 3  # shard 0 beat a moment ago
