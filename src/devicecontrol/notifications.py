"""Changes announced to every process on one database: a command made, a command finished,
the events' log grown (events/log.py).

Why: the device link must hear at once of a command any HTTP worker made, and a request
waiting for a result (``?wait``, ``/provider/send``) of the result the link stored, with
no polling interval in between (contract §9, Commands). The live events of contract §11
ride the same announcements. An announcement carries ids only and follows the
commit; whoever hears it reads the database. So a lost one costs the listener's slow
safety sweep (``DEVICECONTROL_COMMAND_SWEEP``), never a wrong answer.

- PostgreSQL: ``NOTIFY`` on one channel, ``LISTEN`` on a connection of each listening
  process's own, connected again when it drops.
- SQLite: the processes on one database file (one ``serve``: its workers and its link)
  share a directory of Unix datagram sockets named after the file; an announcement is a
  datagram to each socket in it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import secrets
import socket
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import asyncpg
from sqlalchemy.engine import make_url

CHANNEL = "devicecontrol"
COMMAND_MADE = "command_made"
COMMAND_FINISHED = "command_finished"
EVENTS_LOGGED = "events_logged"  # subject: the newest position of the events' log
KINDS = (COMMAND_MADE, COMMAND_FINISHED, EVENTS_LOGGED)
RECONNECT_S = 1.0
CONNECT_TIMEOUT_S = 1.0
logger = logging.getLogger("devicecontrol.notifications")


@dataclass(frozen=True, slots=True)
class Change:
    """What changed: ``kind`` of ``subject_id`` (a command's id; for EVENTS_LOGGED, a
    position of the events' log) of controller ``controller_id`` (0 when none)."""

    kind: str
    controller_id: int
    subject_id: int

    def encode(self) -> str:
        return f"{self.kind} {self.controller_id} {self.subject_id}"

    @classmethod
    def decode(cls, text: str) -> Change | None:
        """None for anything that is not an announcement of ours."""
        parts = text.split(" ")
        if len(parts) != 3 or parts[0] not in KINDS:
            return None
        try:
            return cls(parts[0], int(parts[1]), int(parts[2]))
        except ValueError:
            return None


Listener = Callable[[Change], None]


class Channel(Protocol):
    """How announcements travel between the processes of one database."""

    async def listen(self, heard: Callable[[str], None]) -> None: ...

    async def send(self, text: str) -> None: ...

    async def close(self) -> None: ...


class Changes:
    """This process's end of the announcements: it announces, and tells its listeners
    (the link, waiting requests) what any process announced, itself included."""

    def __init__(self, database_url: str) -> None:
        self._listeners: list[Listener] = []
        self._channel = channel_for(database_url)
        self._started = False

    async def start(self) -> bool:
        """Hear what others announce, from now on (a process that only announces need not
        start); True if this call started it, so that the caller may look once more for
        what was announced just before."""
        if self._started:
            return False
        self._started = True
        try:
            await self._channel.listen(self._heard)
        except Exception:  # the sweeps still find every change, later
            logger.warning("cannot hear announcements; relying on the sweeps", exc_info=True)
        return True

    async def close(self) -> None:
        await self._channel.close()

    def add_listener(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def remove_listener(self, listener: Listener) -> None:
        with contextlib.suppress(ValueError):
            self._listeners.remove(listener)

    async def announce(self, change: Change) -> None:
        """Tell every listening process, after the change has committed. A failure is
        only logged: the listeners' sweep finds the change a little later."""
        try:
            await self._channel.send(change.encode())
        except Exception:
            logger.debug("an announcement was lost (%s)", change, exc_info=True)

    @contextlib.contextmanager
    def finished(self, command_id: int) -> Iterator[asyncio.Event]:
        """An event set when command ``command_id`` is announced finished, while the
        block runs (a request waiting for a result)."""
        event = asyncio.Event()

        def hear(change: Change) -> None:
            if change.kind == COMMAND_FINISHED and change.subject_id == command_id:
                event.set()

        self.add_listener(hear)
        try:
            yield event
        finally:
            self.remove_listener(hear)

    def _heard(self, text: str) -> None:
        change = Change.decode(text)
        if change is None:
            return
        for listener in list(self._listeners):
            try:
                listener(change)
            except Exception:
                logger.warning("a listener failed on %s", change, exc_info=True)


def channel_for(database_url: str) -> Channel:
    url = make_url(database_url)
    if url.get_backend_name() == "postgresql":
        dsn = url.set(drivername="postgresql").render_as_string(hide_password=False)
        return PostgresChannel(dsn)
    database = url.database or ""
    if database in ("", ":memory:"):
        return LocalChannel(None)
    return LocalChannel(Path(database).resolve())


class PostgresChannel:
    """``pg_notify`` to send, and ``LISTEN`` on a connection of its own."""

    def __init__(self, dsn: str) -> None:
        self._dsn = dsn
        self._sender: asyncpg.Connection | None = None
        self._sending = asyncio.Lock()
        self._heard: Callable[[str], None] | None = None
        self._listener: asyncpg.Connection | None = None
        self._keeper: asyncio.Task[None] | None = None
        self._listening = asyncio.Event()
        self._closed = False

    async def send(self, text: str) -> None:
        async with self._sending:
            if self._sender is None or self._sender.is_closed():
                self._sender = await asyncpg.connect(self._dsn, timeout=CONNECT_TIMEOUT_S)
            try:
                await self._sender.execute("SELECT pg_notify($1, $2)", CHANNEL, text)
            except BaseException:
                sender, self._sender = self._sender, None
                sender.terminate()
                raise

    async def listen(self, heard: Callable[[str], None]) -> None:
        """Returns once LISTEN is in place (or after a connect timeout: the keeper goes on
        trying, and the sweeps cover the meantime)."""
        self._heard = heard
        self._keeper = asyncio.create_task(self._keep_listening(), name="notifications")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._listening.wait(), 2 * CONNECT_TIMEOUT_S)

    async def _keep_listening(self) -> None:
        """LISTEN, and again after the connection drops (an outage, a restart)."""
        while not self._closed:
            try:
                self._listener = await asyncpg.connect(self._dsn, timeout=CONNECT_TIMEOUT_S)
                dropped = asyncio.Event()
                self._listener.add_termination_listener(lambda _, ended=dropped: ended.set())
                await self._listener.add_listener(CHANNEL, self._notified)
                self._listening.set()
                await dropped.wait()
            except (OSError, asyncpg.PostgresError, TimeoutError):
                pass
            await asyncio.sleep(RECONNECT_S)

    def _notified(self, _connection: object, _pid: int, _channel: str, payload: str) -> None:
        if self._heard is not None:
            self._heard(payload)

    async def close(self) -> None:
        self._closed = True
        if self._keeper is not None:
            self._keeper.cancel()
            await asyncio.gather(self._keeper, return_exceptions=True)
        for connection in (self._listener, self._sender):
            if connection is not None and not connection.is_closed():
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(connection.close(), CONNECT_TIMEOUT_S)


class LocalChannel:
    """Unix datagram sockets in a directory of the system's temp directory named after
    the database file (short: socket paths are limited to 107 bytes); only this user's.

    ``None`` (an in-memory database) reaches this process alone.
    """

    def __init__(self, database: Path | None) -> None:
        self._directory: Path | None = None
        if database is not None:
            digest = hashlib.sha256(str(database).encode()).hexdigest()[:16]
            self._directory = Path(tempfile.gettempdir()) / f"devicecontrol-{digest}"
        self._path: Path | None = None
        self._socket: socket.socket | None = None
        self._heard: Callable[[str], None] | None = None

    def _shared_directory(self, *, make: bool) -> Path | None:
        """The directory (made if ``make``); None if there is none yet, or if someone
        else owns it (not trusted)."""
        if self._directory is None:
            return None
        if make:
            self._directory.mkdir(mode=0o700, exist_ok=True)
        try:
            owner = self._directory.stat().st_uid
        except FileNotFoundError:
            return None
        return self._directory if owner == os.getuid() else None

    async def listen(self, heard: Callable[[str], None]) -> None:
        self._heard = heard
        directory = self._shared_directory(make=True)
        if directory is None:
            return
        self._path = directory / f"{os.getpid()}-{secrets.token_hex(4)}.sock"
        self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._socket.setblocking(False)
        self._socket.bind(str(self._path))
        # read on the loop's own readiness callback (uvloop's datagram endpoints take no
        # Unix socket path)
        asyncio.get_running_loop().add_reader(self._socket.fileno(), self._receive)

    def _receive(self) -> None:
        assert self._socket is not None and self._heard is not None
        while True:
            try:
                data = self._socket.recv(512)
            except (BlockingIOError, InterruptedError):
                return
            self._heard(data.decode("utf-8", "replace"))

    async def send(self, text: str) -> None:
        data = text.encode("utf-8")
        directory = self._shared_directory(make=False)
        if directory is None:  # nobody listens, but perhaps this process (in memory)
            if self._heard is not None and self._socket is None:
                self._heard(text)
            return
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sender:
            sender.setblocking(False)
            for path in directory.glob("*.sock"):
                try:
                    sender.sendto(data, str(path))
                except (ConnectionRefusedError, FileNotFoundError):
                    path.unlink(missing_ok=True)  # its process is gone
                except (BlockingIOError, OSError):
                    continue  # a listener that is behind: its sweep catches up

    async def close(self) -> None:
        if self._socket is not None:
            with contextlib.suppress(RuntimeError, ValueError):  # its loop may be gone
                asyncio.get_running_loop().remove_reader(self._socket.fileno())
            self._socket.close()
            self._socket = None
        if self._path is not None:
            self._path.unlink(missing_ok=True)
            self._path = None
            with contextlib.suppress(OSError):  # the last one out removes the directory
                assert self._directory is not None
                self._directory.rmdir()
