"""One open stream (contract §11): which controllers it follows, what it has still to send,
and why it ended.

Every event, live or read back on a resume, goes through ``offer``, which applies the
stream's rules in log order: a controller's events while the stream's user owns it, ``end``
when they lose it (a one-controller stream then ends), an ``online`` when the
all-controllers stream gains one. A one-controller stream replaying what its client
missed (``replaying_for``: the controller, the caller's now) takes a loss on the way as no
end: it hides what came while the controller was another's, and says ``gap`` where it
came back; a gain on the way starts its events with the gain's ``online``. What waits to
be sent is bounded (MAX_WAITING): a reader too slow for its events has its stream closed,
and resumes with ``Last-Event-ID``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

import msgspec

from devicecontrol.devices.routes import command_path
from devicecontrol.events.log import EventKind
from devicecontrol.http.hal import api_path

MAX_WAITING = 1_000  # events waiting to be sent on one stream; more closes it

_decode = msgspec.json.Decoder().decode
_encode = msgspec.json.Encoder().encode


class Ended(StrEnum):
    """Why a stream ended (the metric's ``reason``)."""

    CLIENT = "client_closed"
    TOKEN_EXPIRED = "token_expired"  # noqa: S105 - a reason, not a secret
    TOKEN_REVOKED = "token_revoked"  # noqa: S105
    SLOW_READER = "slow_reader"
    CONTROLLER_LOST = "controller_lost"
    SHUTDOWN = "shutdown"  # the process is stopping: the client resumes on another


class LoggedEvent(Protocol):
    """A row of the events' log (events/repository.py)."""

    @property
    def id(self) -> int: ...
    @property
    def controller_id(self) -> int: ...
    @property
    def kind(self) -> str: ...
    @property
    def user_id(self) -> int | None: ...
    @property
    def data(self) -> str: ...


@dataclass(frozen=True, slots=True)
class Outgoing:
    """An event as it goes on the wire."""

    id: int
    event: str
    data: str


class Stream:
    def __init__(self, user_id: int, controllers: set[int], *, one_controller: bool) -> None:
        self.user_id = user_id
        self.controllers = controllers  # the ids of those it follows now
        self.one_controller = one_controller
        self.skip_upto = 0  # events up to here are in what the stream opened with
        # a one-controller stream's controller while it replays what its client missed
        self.replaying_for: int | None = None
        self._hidden = False  # in that replay, it was another's for a while
        self.ended: Ended | None = None
        self._waiting: list[Outgoing] = []  # an empty list is ten times smaller than a deque
        # set while the writer waits: a bare future and a timer, not an Event and
        # wait_for's task (a thousand idle streams hold a thousand of these)
        self._wakeup: asyncio.Future[None] | None = None
        # called when the reader falls MAX_WAITING behind: its lane drops the connection
        self.on_overflow: Callable[[], object] | None = None

    def offer(self, event: LoggedEvent) -> None:
        """Take ``event`` if it is this stream's (the log's events, in order)."""
        if event.id <= self.skip_upto or self.ended is not None:
            return
        kind = event.kind
        if kind == EventKind.GAINED:
            returning = event.controller_id == self.replaying_for
            if event.user_id == self.user_id and (not self.one_controller or returning):
                self.controllers.add(event.controller_id)
                if returning and self._hidden:  # what came meanwhile was another's
                    self._hidden = False
                    self.gap(event.id)
                self._put(Outgoing(event.id, EventKind.ONLINE, event.data))
        elif kind == EventKind.LOST:
            if event.user_id == self.user_id and event.controller_id in self.controllers:
                self.controllers.discard(event.controller_id)
                if event.controller_id == self.replaying_for:
                    self._hidden = True  # it is back by the replay's end: no end
                    return
                self._put(Outgoing(event.id, "end", event.data))
                if self.one_controller:
                    self.end(Ended.CONTROLLER_LOST)
        elif event.controller_id in self.controllers:
            data = _with_links(event.data) if kind == EventKind.COMMAND else event.data
            self._put(Outgoing(event.id, kind, data))

    def opening(self, position: int, state: dict[int, tuple[str, bool]]) -> None:
        """The current ``online`` of each controller, as of ``position``, from its
        (serial number, online)."""
        for controller_id in self.controllers:
            serial_number, online = state[controller_id]
            data = {"serial_number": serial_number, "online": online}
            self._put(Outgoing(position, EventKind.ONLINE, _encode(data).decode()))

    def gap(self, position: int) -> None:
        """What the client missed is no longer kept: it reads the resources again."""
        self._put(Outgoing(position, "gap", _encode({"serial_number": None}).decode()))

    def _put(self, outgoing: Outgoing) -> None:
        if len(self._waiting) >= MAX_WAITING:
            self.end(Ended.SLOW_READER)
            if self.on_overflow is not None:
                self.on_overflow()
            return
        self._waiting.append(outgoing)
        self._wake()

    def end(self, reason: Ended) -> None:
        """The stream ends once what waits has been sent (all but for a slow reader)."""
        if self.ended is None:
            self.ended = reason
            if reason == Ended.SLOW_READER:
                self._waiting.clear()
        self._wake()

    def _wake(self) -> None:
        if self._wakeup is not None and not self._wakeup.done():
            self._wakeup.set_result(None)

    async def next_events(self, timeout_s: float) -> list[Outgoing]:
        """What waits to be sent, once there is some or after ``timeout_s`` (then [])."""
        if not self._waiting and self.ended is None:
            loop = asyncio.get_running_loop()
            self._wakeup = wakeup = loop.create_future()
            timer = loop.call_later(timeout_s, _time_up, wakeup)
            try:
                await wakeup
            finally:
                timer.cancel()
                self._wakeup = None
        taken, self._waiting = self._waiting, []
        return taken

    @property
    def waiting(self) -> int:
        return len(self._waiting)


def _time_up(wakeup: asyncio.Future[None]) -> None:
    if not wakeup.done():
        wakeup.set_result(None)


def _with_links(data: str) -> str:
    """A command event's data with the command's ``_links``, as its read shows them."""
    decoded: dict[str, Any] = _decode(data)
    command = decoded["command"]
    path = api_path(command_path(decoded["serial_number"], command["id"]))
    command["_links"] = {"self": {"href": path}}
    return _encode(decoded).decode()
