"""A clock that stands still until a test moves it: time-based rules tested without sleeping.

Installed through ``devicecontrol.clock.use_time_source`` by the ``clock`` fixture, it is
what ``utcnow``, token expiry, throttling windows and the token cache's TTL all read in
this process. Servers started as subprocesses keep the real clocks.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta


class FakeClock:
    def __init__(self, start: datetime | None = None) -> None:
        # a whole second, so that ``utcnow()`` (second precision) equals the full instant
        self._now = start or datetime.now(UTC).replace(microsecond=0)
        self._monotonic = time.monotonic()

    def now(self) -> datetime:
        return self._now

    def monotonic(self) -> float:
        return self._monotonic

    def advance(self, seconds: float) -> None:
        """Move both clocks forward, as that much waiting would."""
        if seconds < 0:
            raise ValueError("time does not go back")
        self._now += timedelta(seconds=seconds)
        self._monotonic += seconds
