"""How long the link was away from its broker, so that what waited there is judged fairly.

An external broker keeps the devices' messages while no link reads them (RabbitMQ's shard
queues, Mosquitto's persistent sessions): a link restarted, killed, failed over, or cut
off from its broker for a while finds a backlog that comes all at once. Judged by the rate
as it comes, a device's messages past one burst would be dropped after being acknowledged
to the device. So the link credits the rate with the time it was away
(``limits.MessageRate.away``):

- cut off in the process's life: from the adapter's ``broker_lost`` to ``broker_back``;
- not running at all: from the heartbeat the process of this shard last wrote
  (``link_heartbeats``, every ``HEARTBEAT_S`` while reading), read as the link starts.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from sqlalchemy import select
from sqlalchemy.dialects import postgresql, sqlite

from devicecontrol.clock import monotonic, utcnow
from devicecontrol.database.engine import Writer
from devicecontrol.database.tables import link_heartbeats
from devicecontrol.devices.link.limits import MessageRate
from devicecontrol.devices.link.outage import Outage
from devicecontrol.observability.logs import emit
from devicecontrol.runtime import Runtime

__all__ = ["Absence"]

HEARTBEAT_S = 2.0  # the absence of a link that died is known to within this
logger = logging.getLogger("devicecontrol.devices.link")


class Absence:
    """The link's absences from its broker, credited to ``rate``; ``shard`` is the row
    of ``link_heartbeats`` this process keeps."""

    def __init__(self, runtime: Runtime, rate: MessageRate, *, shard: int) -> None:
        self.runtime = runtime
        self.rate = rate
        self.shard = shard
        self._lost_at: float | None = None

    async def started(self) -> None:
        """Before the broker starts: the time since this shard's last heartbeat (none: a
        first start) is credited."""
        async with self.runtime.database.read() as connection:
            reading_at = (
                await connection.execute(
                    select(link_heartbeats.c.reading_at).where(
                        link_heartbeats.c.shard == self.shard
                    )
                )
            ).scalar()
        if reading_at is not None:
            self._credit((utcnow() - reading_at).total_seconds())

    def lost(self) -> None:
        """The link stopped reading its broker (the connection dropped)."""
        if self._lost_at is None:
            self._lost_at = monotonic()

    def back(self) -> None:
        """The link reads its broker again: the time since ``lost`` is credited."""
        if self._lost_at is not None:
            seconds, self._lost_at = monotonic() - self._lost_at, None
            self._credit(seconds)

    def _credit(self, seconds: float) -> None:
        if seconds <= 0:
            return
        self.rate.away(seconds)
        emit(
            logger,
            logging.INFO,
            {"event": "device_link_catching_up", "away_s": round(seconds, 1)},
        )

    async def heartbeat(self, reading: Callable[[], bool]) -> None:
        """Every ``HEARTBEAT_S`` while the broker is read, the time, for the next start."""
        outage = Outage("the device link cannot note that it is reading its broker")
        while True:
            if reading():
                try:
                    async with self.runtime.database.write() as connection:
                        await _beat(connection, self.shard)
                except Exception:
                    outage.failed()
                else:
                    outage.recovered()
            await asyncio.sleep(HEARTBEAT_S)


async def _beat(connection: Writer, shard: int) -> None:
    """This shard's heartbeat row, now (an upsert on either engine)."""
    dialect_insert = postgresql.insert if connection.dialect.name == "postgresql" else sqlite.insert
    row = dialect_insert(link_heartbeats).values(shard=shard, reading_at=utcnow())
    upsert = row.on_conflict_do_update(
        index_elements=[link_heartbeats.c.shard], set_={"reading_at": row.excluded.reading_at}
    )
    await connection.execute(upsert)
