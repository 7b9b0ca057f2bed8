"""Rotated device secrets end the connections made with the old ones (contract §9): the
link looks every second, when the broker does not do it itself (``Broker.checks_secrets``).

Each look is one indexed read of the few secrets changed lately (since a minute before the
previous look, so that a rotation stamped by a clock that much behind is still seen),
however many devices are connected: reading all of theirs would stop the loop for tens
of milliseconds.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import timedelta

from devicecontrol.clock import utcnow
from devicecontrol.devices import repository
from devicecontrol.devices.link.outage import Outage
from devicecontrol.devices.link.ports import Broker, DeviceConnection
from devicecontrol.devices.link.registry import log_connection
from devicecontrol.runtime import Runtime

__all__ = ["ROTATION_LOOKBACK", "WATCH_S", "RotationWatch"]

WATCH_S = 1.0  # a rotated secret closes its connection this soon
ROTATION_LOOKBACK = timedelta(minutes=1)


class RotationWatch:
    """Closes, through the broker, each connection whose device's secret changed since."""

    def __init__(
        self, runtime: Runtime, broker: Broker, connections: Mapping[str, DeviceConnection]
    ) -> None:
        self.runtime = runtime
        self.broker = broker
        self.connections = connections
        self._checked_at = utcnow()  # the secrets rotated before are not in use
        self._outage = Outage("the device link cannot check device secrets")

    async def run(self) -> None:
        while True:
            await asyncio.sleep(WATCH_S)
            await self._outage.attempt(self.close_rotated)

    async def close_rotated(self) -> None:
        """Close the connections made with a secret rotated since (a minute before) the
        last look."""
        now = utcnow()
        since = self._checked_at - ROTATION_LOOKBACK
        async with self.runtime.database.read() as database:
            changed = await repository.secrets_changed_since(database, since)
        self._checked_at = now
        for serial_number, digest in changed.items():
            connection = self.connections.get(serial_number)
            if connection is not None and connection.identity.secret_digest != digest:
                log_connection("device_secret_changed", connection)
                await self.broker.close_connection(connection)
