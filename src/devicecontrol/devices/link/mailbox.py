"""Each device's control work, in order: online and offline, deliveries to it.

A device's jobs run one at a time, in the order they were put, so that a connection and
its end are stored in the order they happened; devices run in parallel, and each gets a
task only while it has work. Its messages go to ``ingest.py`` (batched, acknowledged after
commit), never here: a device's message rate is bounded before that (``limits.py``).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable

Job = Callable[[], Awaitable[None]]
logger = logging.getLogger("devicecontrol.devices.link")


class Mailbox:
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
