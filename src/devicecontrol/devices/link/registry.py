"""Who is connected, as the link sees it: each device's current connection (by serial
number and by controller id), and every connection not ended yet (taken-over ones too).

A proved device's new connection becomes its current one and takes the previous over
(MQTT's rule): that one ends without taking the device offline. The link writes
``online`` from what this says (``core.py``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping

from devicecontrol.devices.identity import DeviceIdentity
from devicecontrol.devices.link.ports import DeviceConnection
from devicecontrol.observability.logs import emit

__all__ = ["Connections", "log_connection"]

logger = logging.getLogger("devicecontrol.devices.link")


def log_connection(event: str, connection: DeviceConnection) -> None:
    """One line of what befell a device's connection, with its serial and address."""
    fields = {"event": event, "serial_number": connection.identity.serial_number,
              "client_address": connection.address}  # fmt: skip
    emit(logger, logging.INFO, fields)


class Connections(Mapping[str, DeviceConnection]):
    """The current connection of each connected device, by serial number."""

    def __init__(self) -> None:
        self._current: dict[str, DeviceConnection] = {}
        self._by_controller: dict[int, DeviceConnection] = {}
        self._live: set[DeviceConnection] = set()  # not ended yet, taken-over ones included

    def __getitem__(self, serial_number: str) -> DeviceConnection:
        return self._current[serial_number]

    def __iter__(self) -> Iterator[str]:
        return iter(self._current)

    def __len__(self) -> int:
        return len(self._current)

    @property
    def live(self) -> frozenset[DeviceConnection]:
        """Every connection not ended yet (stopping waits for them)."""
        return frozenset(self._live)

    def of_controller(self, controller_id: int) -> DeviceConnection | None:
        return self._by_controller.get(controller_id)

    def claim(
        self, device: DeviceIdentity, address: str
    ) -> tuple[DeviceConnection, DeviceConnection | None]:
        """A proved device's new connection becomes its current one; returns it and the
        one it takes over."""
        connection = DeviceConnection(device, address)
        previous = self._current.get(device.serial_number)
        self._current[device.serial_number] = connection
        self._by_controller[device.controller_id] = connection
        self._live.add(connection)
        return connection, previous

    def end(self, connection: DeviceConnection) -> bool:
        """A connection ended; True when it was its device's current one (the device is
        offline now), False when it had been taken over (the device is still online)."""
        connection.end()
        self._live.discard(connection)
        device = connection.identity
        if self._current.get(device.serial_number) is not connection:
            return False
        del self._current[device.serial_number]
        self._by_controller.pop(device.controller_id, None)
        return True

    def clear(self) -> None:
        """Forget every connection (the link knows of none any more)."""
        for connection in self._current.values():
            connection.end()
            self._live.discard(connection)
        self._current.clear()
        self._by_controller.clear()
