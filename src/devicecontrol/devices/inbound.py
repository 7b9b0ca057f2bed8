"""What the link does with each device's traffic: its message rate (contract §9), and its
online changes and deliveries in order per device, devices in parallel.

A device's control work (online, offline, deliveries to it) runs one job at a time, so
that a connection and its end are stored in the order they happened. Each device gets a
task only while it has work. Its messages go to ``ingest.py`` (batched, acknowledged after
commit), never here.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable

from devicecontrol.clock import monotonic
from devicecontrol.config import ThrottleRule
from devicecontrol.observability.metrics import DEVICE_MESSAGES_DROPPED

Job = Callable[[], Awaitable[None]]
logger = logging.getLogger("devicecontrol.devices.link")


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


class DeviceWork:
    """Jobs per device, run in the order they were put, one device's after another's never."""

    def __init__(self) -> None:
        self._jobs: dict[str, deque[Job]] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._failing = False

    def put(self, serial_number: str, job: Job) -> None:
        self._jobs.setdefault(serial_number, deque()).append(job)
        if serial_number not in self._tasks:
            task = asyncio.create_task(self._run(serial_number), name=f"device {serial_number}")
            self._tasks[serial_number] = task

    async def _run(self, serial_number: str) -> None:
        jobs = self._jobs[serial_number]
        while jobs:
            job = jobs.popleft()
            try:
                await job()
            except Exception:  # one failed job (a database outage) must not end the others
                if not self._failing:  # once per outage, not once per message
                    logger.warning("the device link's work fails", exc_info=True)
                self._failing = True
            else:
                if self._failing:
                    logger.warning("the device link's work succeeds again")
                self._failing = False
        # no await since the last check: nothing was put in between
        del self._jobs[serial_number], self._tasks[serial_number]

    async def drained(self) -> None:
        """Wait until every job put so far has run."""
        while self._tasks:
            await asyncio.gather(*self._tasks.values(), return_exceptions=True)
