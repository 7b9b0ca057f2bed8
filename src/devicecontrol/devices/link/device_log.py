"""What devices cause, logged at most once per reason per 10 s, with the count (contract §9).

A thousand idle sockets, or one device sending garbage in a loop, must not become a
thousand log lines: the first event of a reason is written at once; those that follow
within the window are counted, and the next line after it says how many there were.
"""

from __future__ import annotations

import logging

from devicecontrol.clock import monotonic
from devicecontrol.observability.logs import emit

WINDOW_S = 10.0
logger = logging.getLogger("devicecontrol.devices.link")


class DeviceEventLog:
    def __init__(self, window_s: float = WINDOW_S) -> None:
        self.window_s = window_s
        self._last: dict[str, float] = {}  # reason -> when its last line was written
        self._unwritten: dict[str, int] = {}  # reason -> events since that line

    def note(self, event: str, reason: str, **fields: str) -> None:
        """One event; written now if its reason has no line in the window, else counted."""
        now = monotonic()
        count = self._unwritten.get(reason, 0) + 1
        last = self._last.get(reason)
        if last is not None and now - last < self.window_s:
            self._unwritten[reason] = count
            return
        self._last[reason] = now
        self._unwritten[reason] = 0
        line = {"event": event, "reason": reason, "count": count, **fields}
        emit(logger, logging.WARNING, line)
