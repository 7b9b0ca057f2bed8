"""Commands to a connected device, and what comes back: the link's side of contract §9.

A command is marked ``sent`` first (only if still queued and unexpired, in one conditional
UPDATE) and published after: a command that expired or finished meanwhile is never
published, and one published to a device that vanished stays ``sent`` without a result,
so the next subscription delivers it again (at least once).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from sqlalchemy import Row

from devicecontrol.clock import monotonic, utcnow
from devicecontrol.devices import commands, repository, topics
from devicecontrol.devices.identity import DeviceIdentity
from devicecontrol.observability.metrics import COMMAND_ROUND_TRIP
from devicecontrol.runtime import Runtime

Publish = Callable[[str, bytes], Awaitable[None]]


class RoundTrips:
    """When this link first published each unfinished command, for the round-trip time.

    A command is forgotten at its result or once it has expired, so the memory held is
    that of the commands in flight.
    """

    def __init__(self) -> None:
        self._published: dict[int, tuple[float, float]] = {}  # id -> (at, forget after)

    def published(self, command: Row) -> None:
        if command.id not in self._published:
            now = monotonic()
            ttl_s = (command.expires_at - utcnow()).total_seconds()
            self._published[command.id] = (now, now + max(ttl_s, 0.0) + 1.0)

    def finished(self, command_id: int) -> None:
        published = self._published.pop(command_id, None)
        if published is not None:
            COMMAND_ROUND_TRIP.observe(monotonic() - published[0])

    def forget_expired(self) -> None:
        now = monotonic()
        for command_id in [k for k, (_, until) in self._published.items() if until < now]:
            del self._published[command_id]


async def deliverable(runtime: Runtime, identity: DeviceIdentity) -> list[Row]:
    """What a device that has just subscribed gets: queued, or sent without a result."""
    async with runtime.database.read() as connection:
        return await repository.deliverable_commands(connection, identity.controller_id, utcnow())


async def still_queued(runtime: Runtime, identity: DeviceIdentity) -> list[Row]:
    """What a subscribed device has not been sent yet (a command was just made)."""
    async with runtime.database.read() as connection:
        return await repository.queued_commands_of(connection, [identity.controller_id], utcnow())


async def deliver(
    runtime: Runtime,
    identity: DeviceIdentity,
    rows: Sequence[Row],
    *,
    publish: Publish,
    round_trips: RoundTrips,
) -> None:
    """Publish each command (in the order given: creation order) that may still be sent."""
    topic = topics.commands_topic(identity.serial_number)
    for command in rows:
        if await commands.mark_sent(runtime, command):
            await publish(topic, commands.delivery_payload(command))
            round_trips.published(command)
