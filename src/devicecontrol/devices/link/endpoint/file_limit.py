"""How many device connections the endpoint holds at once: each is an open file, and the
process may open at most RLIMIT_NOFILE of them, of which the link needs some itself
(database connections, SQLite's files, the metrics' files, its pipes): ``RESERVED_FILES``.

At the limit a new device is refused at once: its socket is closed before a byte is read
(the device sees the connection end and tries again later), counted in
``devicecontrol_device_connections_closed_total{reason="file_limit"}``, and the episode is
logged once when it begins and once when it ends. The listener keeps accepting, so the
next device after a connection closes is let in, and the link never runs out of files
for its database. Should the process run out all the same (files opened elsewhere in
it), the event loop pauses accepting for a second (asyncio's own handling of EMFILE),
which is counted and logged the same way.
"""

from __future__ import annotations

import asyncio
import logging
import resource
from typing import Any

from devicecontrol.observability.logs import emit
from devicecontrol.observability.metrics import (
    DEVICE_CONNECTIONS_CLOSED,
    DEVICE_SOCKETS_CAPACITY,
    DEVICE_SOCKETS_OPEN,
)

__all__ = ["RESERVED_FILES", "ConnectionGate", "device_capacity", "raise_soft_limit"]

# a link process holds about 25 files with no device on SQLite; PostgreSQL's pools (write,
# read, hot statements, notifications) add about 30: what is left of 128 is the margin
RESERVED_FILES = 128
REASON = "file_limit"
# asyncio's message when accept() fails for want of files (EMFILE, ENFILE, ENOBUFS, ENOMEM)
_ACCEPT_OUT_OF_RESOURCES = "socket.accept() out of system resource"
logger = logging.getLogger("devicecontrol.devices.link")


def raise_soft_limit() -> int:
    """Raise the soft limit on open files to the hard one (systemd's ``LimitNOFILE`` sets
    both; a shell's ``ulimit -Sn`` only the soft one); the limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft != resource.RLIM_INFINITY and soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass  # kept as it was: the capacity follows what is in force
    return soft if soft != resource.RLIM_INFINITY else 1 << 20


def device_capacity(open_files: int) -> int:
    """How many device connections fit under a limit of ``open_files``."""
    return max(open_files - RESERVED_FILES, 0)


class ConnectionGate:
    """Counts the device sockets open; ``admit`` refuses one past ``capacity``."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.open = 0
        self._refused = 0  # in the episode under way; 0 when none is
        DEVICE_SOCKETS_CAPACITY.set(capacity)

    def admit(self) -> bool:
        """A socket just accepted: True if it may stay (``release`` it when it closes)."""
        if self.open >= self.capacity:
            self.refused()
            return False
        self.open += 1
        DEVICE_SOCKETS_OPEN.set(self.open)
        self._end_episode()
        return True

    def release(self) -> None:
        self.open -= 1
        DEVICE_SOCKETS_OPEN.set(self.open)

    def refused(self) -> None:
        """A device not let in for want of files: counted, the episode's first logged."""
        DEVICE_CONNECTIONS_CLOSED.labels(REASON).inc()
        if self._refused == 0:
            line = {"event": "device_connections_at_file_limit", "open": self.open,
                    "capacity": self.capacity}  # fmt: skip
            emit(logger, logging.WARNING, line)
        self._refused += 1

    def _end_episode(self) -> None:
        if self._refused:
            line = {"event": "device_connections_below_file_limit",
                    "refused": self._refused, "open": self.open}  # fmt: skip
            emit(logger, logging.WARNING, line)
            self._refused = 0

    def watch_accept_failures(self, loop: asyncio.AbstractEventLoop) -> None:
        """Count asyncio's pauses in accepting for want of files as refusals (the episode's
        log, not a traceback a second); anything else goes to the handler set before."""
        previous = loop.get_exception_handler()

        def handle(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
            if context.get("message") == _ACCEPT_OUT_OF_RESOURCES:
                self.refused()
            elif previous is not None:
                previous(loop, context)
            else:
                loop.default_exception_handler(context)

        loop.set_exception_handler(handle)
