"""Acknowledge in arrival order, each message once it is stored (contract §9, Readings).

MQTT 3.1.1 sends a session's acknowledgements in the order of its PUBLISHes, and the link
acknowledges nothing before it is in the database: a message takes its turn when it
arrives, and its acknowledgement goes once it and every message before it are settled.
Every adapter keeps one queue per session: the endpoint one per device connection, the
Mosquitto client one for the link's own session.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Generic, Protocol, TypeVar

from devicecontrol.devices.link.outage import Outage
from devicecontrol.devices.link.ports import Stored

__all__ = ["InOrderAcknowledgements", "Settles", "Turn", "take_in_order"]

Acknowledgement = TypeVar("Acknowledgement")


class Settles(Protocol):
    """Something a broker sent the link, with its place among the acknowledgements."""

    def settle(self) -> None: ...


Item = TypeVar("Item", bound=Settles)


class Turn(Generic[Acknowledgement]):
    """One message's place in its session's queue."""

    __slots__ = ("_queue", "acknowledgement", "settled")

    def __init__(
        self, queue: InOrderAcknowledgements[Acknowledgement], acknowledgement: Acknowledgement
    ) -> None:
        self._queue = queue
        self.acknowledgement = acknowledgement
        self.settled = False

    def settle(self) -> None:
        """Stored, or handled with nothing to store: acknowledged once the earlier ones are
        (settling twice changes nothing)."""
        if not self.settled:
            self.settled = True
            self._queue.flush()

    def settle_when_stored(self, stored: Stored | None) -> None:
        """Settle once ``stored`` is done; at once when nothing is stored (None)."""
        if stored is None or stored.done():
            self.settle()
        else:
            stored.add_done_callback(lambda _: self.settle())


class InOrderAcknowledgements(Generic[Acknowledgement]):
    """The acknowledgements of one session, sent with ``send`` in arrival order."""

    def __init__(self, send: Callable[[Acknowledgement], None]) -> None:
        self._send = send
        # a list, not a deque: every connected device has one, mostly empty, and an empty
        # deque is 760 bytes (a list 56); it holds the few messages in flight
        self._turns: list[Turn[Acknowledgement]] = []

    def arrived(self, acknowledgement: Acknowledgement) -> Turn[Acknowledgement]:
        """A message came: its turn, to settle once it is stored or handled."""
        turn = Turn(self, acknowledgement)
        self._turns.append(turn)
        return turn

    def when_stored(self, stored: Stored | None, acknowledgement: Acknowledgement) -> None:
        """A message came and was handed to the link: acknowledged in its turn once stored."""
        self.arrived(acknowledgement).settle_when_stored(stored)

    def flush(self) -> None:
        """Send every acknowledgement up to the first turn not yet settled."""
        turns = self._turns
        settled = 0
        while settled < len(turns) and turns[settled].settled:
            self._send(turns[settled].acknowledgement)
            settled += 1
        del turns[:settled]


async def take_in_order(
    items: AsyncIterator[Item], handle: Callable[[Item], Awaitable[None]], failing: Outage
) -> None:
    """What an external broker sends the link, handled one after another in arrival order
    (``handle`` settles each, a device's message once stored). One whose handling fails is
    settled at once, since the broker would only send it again, and the failure is logged
    once until handling works again; the reader goes on."""
    async for item in items:
        try:
            await handle(item)
        except Exception:
            item.settle()
            failing.failed()
        else:
            failing.recovered()
