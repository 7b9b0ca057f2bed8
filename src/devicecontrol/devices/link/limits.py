"""What a device may send (contract §9, Limits): its message rate; what is not taken is
counted by reason, never queued. What a payload may be (at most 4 KiB of JSON) is the
readings' rule (``devices/readings/service.py``), applied as a message is queued.

The rate is judged as the link takes a message. What a broker kept while the link was away
(a link restarted, failed over, or out of reach of its broker) comes all at once when it is
back, so an absence is credited: after ``away(seconds)`` every device may have as many more
messages taken as its rate allows over that time, once, while the link catches up
(docs/DESIGN.md, "The rate of a backlog").
"""

from __future__ import annotations

from devicecontrol.clock import monotonic
from devicecontrol.config import ThrottleRule
from devicecontrol.observability.metrics import DEVICE_MESSAGES_DROPPED

__all__ = ["MessageRate", "drop"]

MAX_AWAY_S = 3600.0  # no absence is credited beyond an hour's messages
CATCH_UP_MIN_S = 60.0  # a backlog's credit lasts at least this long after the link is back
CATCH_UP_FACTOR = 4.0  # ... and this many times the absence: a link drains faster than live


def drop(reason: str) -> None:
    """Count a device message that is not taken (the metrics' reason label)."""
    DEVICE_MESSAGES_DROPPED.labels(reason).inc()


class MessageRate:
    """At most ``limit`` messages per ``window_s`` per device, bursts up to ``limit``: a
    token bucket per serial number, refilled continuously, plus the credit of an absence."""

    def __init__(self, rule: ThrottleRule) -> None:
        self.capacity = float(rule.limit)
        self.per_second = rule.limit / rule.window_s
        self._buckets: dict[str, tuple[float, float, int]] = {}  # serial -> (tokens, at, credit)
        self._credit = 0.0  # tokens each device gets once for the latest absence
        self._credit_number = 0  # which absence; a bucket notes the last it was credited
        self._credit_until = 0.0  # monotonic: a credit not taken by then lapses

    def away(self, seconds: float) -> None:
        """The link took nothing for ``seconds`` while devices went on sending to the
        broker: each device may have that time's messages more taken, once, while the
        backlog is drained (``CATCH_UP_FACTOR`` times as long, at least ``CATCH_UP_MIN_S``)."""
        if seconds <= 0:
            return
        seconds = min(seconds, MAX_AWAY_S)
        self._credit = seconds * self.per_second
        self._credit_number += 1
        self._credit_until = monotonic() + max(CATCH_UP_MIN_S, CATCH_UP_FACTOR * seconds)

    @property
    def catching_up(self) -> bool:
        """An absence's credit is open: buckets are kept, so that none is credited twice."""
        return monotonic() < self._credit_until

    def _tokens(self, serial_number: str, now: float) -> tuple[float, int]:
        tokens, at, credited = self._buckets.get(serial_number, (self.capacity, now, 0))
        if tokens < self.capacity:
            tokens = min(self.capacity, tokens + (now - at) * self.per_second)
        if now >= self._credit_until:
            return min(tokens, self.capacity), credited
        if credited != self._credit_number:
            return tokens + self._credit, self._credit_number
        return tokens, credited

    def allow(self, serial_number: str) -> bool:
        now = monotonic()
        tokens, credited = self._tokens(serial_number, now)
        allowed = tokens >= 1
        self._buckets[serial_number] = (tokens - 1 if allowed else tokens, now, credited)
        return allowed

    def forget_full(self) -> None:
        """Drop the buckets that have refilled: a new one would be the same (bounds memory).
        Not while a backlog is credited: a new bucket would be credited again."""
        if self.catching_up:
            return
        now = monotonic()
        full = [s for s in self._buckets if self._tokens(s, now)[0] >= self.capacity]
        for serial_number in full:
            del self._buckets[serial_number]
