"""Persistent sessions (MQTT 3.1.1, clean session off): what the link keeps of them.

A persistent session keeps one thing the link needs, whether the device subscribed to its
commands: a connection that resumes it is subscribed again without a SUBSCRIBE, as MQTT
promises, and its queued commands flow. Commands themselves are never queued in a session:
they stay ``sent`` in the database and go again at the next subscription (the outbox).
"""

from __future__ import annotations

from dataclasses import dataclass

from devicecontrol.clock import monotonic

__all__ = ["PersistentSessions", "Resumed"]


@dataclass(frozen=True, slots=True)
class Resumed:
    """What a new connection finds: a session to resume (CONNACK's session present), and
    whether that session holds the subscription to its commands."""

    present: bool
    subscribed: bool


NOT_RESUMED = Resumed(present=False, subscribed=False)


@dataclass(slots=True)
class _Session:
    subscribed: bool
    forget_at: float | None = None  # None while a connection of it lasts


class PersistentSessions:
    """The persistent sessions of devices by serial number. ``expiry_s``: how long one is
    kept after its connection ended (None: as long as the broker that keeps it)."""

    def __init__(self, *, expiry_s: float | None) -> None:
        self.expiry_s = expiry_s
        self._sessions: dict[str, _Session] = {}

    def connected(self, serial_number: str, *, clean: bool) -> Resumed:
        """A proved connection: a clean one ends the device's session, a persistent one
        resumes it if it is there (and not expired), else begins one."""
        previous = self._sessions.pop(serial_number, None)
        if clean:
            return NOT_RESUMED
        if previous is None or (
            previous.forget_at is not None and previous.forget_at <= monotonic()
        ):
            resumed = NOT_RESUMED
        else:
            resumed = Resumed(present=True, subscribed=previous.subscribed)
        self._sessions[serial_number] = _Session(resumed.subscribed)
        return resumed

    def subscribed(self, serial_number: str) -> None:
        """The device subscribed to its commands: a persistent session keeps it."""
        session = self._sessions.get(serial_number)
        if session is not None:
            session.subscribed = True

    def unsubscribed(self, serial_number: str) -> None:
        session = self._sessions.get(serial_number)
        if session is not None:
            session.subscribed = False

    def ended(self, serial_number: str) -> None:
        """The session's connection ended: it is kept ``expiry_s`` more."""
        session = self._sessions.get(serial_number)
        if session is not None and self.expiry_s is not None:
            session.forget_at = monotonic() + self.expiry_s

    def clear(self) -> None:
        """Forget every session (the link knows of no connection any more)."""
        self._sessions.clear()
