"""Which registered device a client id on the broker is, remembered: a device's id and
type never change, and a log line or message of the same client id comes often.

A client id that is no registered serial is remembered too, for ``UNKNOWN_FOR_S``: a
broker account without a controller must not cost a query per message.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from devicecontrol.clock import monotonic
from devicecontrol.controllers.identity import is_serial_number
from devicecontrol.devices.identity import DeviceIdentity

__all__ = ["DeviceIdentities"]

UNKNOWN_FOR_S = 10.0  # a client id that is no registered serial is looked up again after
MAX_UNKNOWN = 10_000  # then the unknown ids are forgotten at once (it only saves queries)


class DeviceIdentities:
    """Registered devices by client id, looked up with ``find_device`` once."""

    def __init__(self, find_device: Callable[[str], Awaitable[DeviceIdentity | None]]) -> None:
        self._find_device = find_device
        self._known: dict[str, DeviceIdentity] = {}
        self._unknown: dict[str, float] = {}  # client id -> when to look it up again

    async def of(self, client_id: str, *, fresh: bool = False) -> DeviceIdentity | None:
        """The registered device of a client id. ``fresh``: a new login, looked up even if
        the id was unknown a moment ago (the command that registered it commits just after
        the broker took the account)."""
        if not is_serial_number(client_id):
            return None
        known = self._known.get(client_id)
        if known is not None:
            return known
        if not fresh and self._unknown.get(client_id, 0.0) > monotonic():
            return None
        device = await self._find_device(client_id)
        if device is None:
            if len(self._unknown) > MAX_UNKNOWN:
                self._unknown.clear()
            self._unknown[client_id] = monotonic() + UNKNOWN_FOR_S
            return None
        self._unknown.pop(client_id, None)
        self._known[client_id] = device
        return device
