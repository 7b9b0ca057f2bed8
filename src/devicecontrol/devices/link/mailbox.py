"""Each device's control work, in order: online and offline, deliveries to it.

A device's jobs run one at a time, in the order they were put, so that a connection and
its end are stored in the order they happened; devices run in parallel, and each gets a
task only while it has work. Its messages go to ``ingest.py`` (batched, acknowledged after
commit), never here: a device's message rate is bounded before that (``limits.py``).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable

from devicecontrol.devices.link.outage import Outage

Job = Callable[[], Awaitable[None]]


class Mailbox:
    """Jobs per device, run in the order they were put, one device's after another's never."""

    def __init__(self) -> None:
        self._jobs: dict[str, deque[Job]] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        # one failed job (a database outage) must not end the others: said once per outage
        self._outage = Outage(
            "the device link's work fails", ended="the device link's work succeeds again"
        )

    def put(self, serial_number: str, job: Job) -> None:
        self._jobs.setdefault(serial_number, deque()).append(job)
        if serial_number not in self._tasks:
            task = asyncio.create_task(self._run(serial_number), name=f"device {serial_number}")
            self._tasks[serial_number] = task

    async def _run(self, serial_number: str) -> None:
        jobs = self._jobs[serial_number]
        while jobs:
            job = jobs.popleft()
            await self._outage.attempt(job)
        # no await since the last check: nothing was put in between
        del self._jobs[serial_number], self._tasks[serial_number]

    async def drained(self) -> None:
        """Wait until every job put so far has run."""
        while self._tasks:
            await asyncio.gather(*self._tasks.values(), return_exceptions=True)
