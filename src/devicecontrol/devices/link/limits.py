"""What a device may send (contract §9, Limits): its message rate; what is not taken is
counted by reason, never queued. What a payload may be (at most 4 KiB of JSON) is the
readings' rule (``devices/readings/service.py``), applied as a message is queued.
"""

from __future__ import annotations

from devicecontrol.clock import monotonic
from devicecontrol.config import ThrottleRule
from devicecontrol.observability.metrics import DEVICE_MESSAGES_DROPPED

__all__ = ["MessageRate", "drop"]


def drop(reason: str) -> None:
    """Count a device message that is not taken (the metrics' reason label)."""
    DEVICE_MESSAGES_DROPPED.labels(reason).inc()


class MessageRate:
    """At most ``limit`` messages per ``window_s`` per device, bursts up to ``limit``: a
    token bucket per serial number, refilled continuously."""

    def __init__(self, rule: ThrottleRule) -> None:
        self.capacity = float(rule.limit)
        self.per_second = rule.limit / rule.window_s
        self._buckets: dict[str, tuple[float, float]] = {}  # serial -> (tokens, at)

    def _tokens(self, serial_number: str, now: float) -> float:
        tokens, at = self._buckets.get(serial_number, (self.capacity, now))
        return min(self.capacity, tokens + (now - at) * self.per_second)

    def allow(self, serial_number: str) -> bool:
        now = monotonic()
        tokens = self._tokens(serial_number, now)
        allowed = tokens >= 1
        self._buckets[serial_number] = (tokens - 1 if allowed else tokens, now)
        return allowed

    def forget_full(self) -> None:
        """Drop the buckets that have refilled: a new one would be the same (bounds memory)."""
        now = monotonic()
        full = [s for s in self._buckets if self._tokens(s, now) >= self.capacity]
        for serial_number in full:
            del self._buckets[serial_number]
