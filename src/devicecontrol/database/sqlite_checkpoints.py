"""SQLite's WAL checkpoints, off the event loop's thread.

Why: SQLite checkpoints on the commit that takes its write-ahead log past 1,000 pages,
inside that commit. The service's writes run on the event loop's thread
(``db.InlineWriter``), so such a commit stopped the loop for the checkpoint's copy and
fsync: 150 to 200 ms every 2.5 s on this disk at 1,000 device readings a second, seen as
the device link's PUBACK and command round trip p99 (docs/PERFORMANCE.md).
The writers' connections have ``wal_autocheckpoint`` off, and each process that writes
checkpoints from a thread of its own instead, every ``CHECKPOINT_EVERY_S``.

A checkpoint here is PASSIVE, as SQLite's own: it copies what no reader still needs and
never waits for a lock, so it never holds a writer back; one that another process runs at
the same moment is skipped. A process that ends closes its connections, and the last one
to close checkpoints whatever is left.
"""

from __future__ import annotations

import logging
import sqlite3
import threading

CHECKPOINT_EVERY_S = 1.0
logger = logging.getLogger("devicecontrol.db")


class Checkpointer:
    """A thread that checkpoints one database file every ``CHECKPOINT_EVERY_S``, from
    ``start()`` (the process's first write) to ``stop()``."""

    def __init__(self, path: str) -> None:
        self._path = path
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._failing = False

    def start(self) -> None:
        """Start the thread, once (later calls do nothing)."""
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="sqlite checkpoints", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._thread is None:
            return
        self._stopping.set()
        self._thread.join()
        self._thread = None
        self._stopping.clear()

    def _run(self) -> None:
        try:
            connection = sqlite3.connect(self._path, isolation_level=None)
        except sqlite3.Error as exc:  # gone since the write that started this thread
            logger.warning("cannot checkpoint the SQLite database: %s", exc)
            return
        try:
            connection.execute("PRAGMA busy_timeout = 0")  # passive: never wait
            while not self._stopping.wait(CHECKPOINT_EVERY_S):
                self._checkpoint(connection)
        finally:
            connection.close()

    def _checkpoint(self, connection: sqlite3.Connection) -> None:
        try:
            connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode == sqlite3.SQLITE_BUSY:
                return  # another process checkpoints now
            if not self._failing:  # once, not every second
                logger.warning("cannot checkpoint the SQLite database: %s", exc)
            self._failing = True
            return
        if self._failing:
            logger.warning("checkpoints of the SQLite database work again")
        self._failing = False
