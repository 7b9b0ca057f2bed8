"""What a resumed session replays, held until the link knows whether to trust it.

Mosquitto keeps the link's persistent session while the link is away and replays it in
order, but gives its log lines a 20-second lifetime: after a longer absence the connects
and disconnects of that time are gone while the devices' messages are not. The broker logs
the link's own disconnection first of all once the link is gone: if that line is in the
replay, nothing after it expired, and the replay is a complete record. The replay ends with
the line of the link's own new connection; it is held until then, and the choice
(``complete``) made first.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from devicecontrol.devices.link.mosquitto import log as mosquitto_log
from devicecontrol.devices.link.mosquitto.log import Connected, Ended, LogEvent, TakenOver
from devicecontrol.devices.link.mqtt_session.client import Message

__all__ = ["Replay", "log_event"]


def log_event(message: Message) -> LogEvent | None:
    """The event a message of the broker's log tells of; None for anything else."""
    if message.topic not in mosquitto_log.TOPICS:
        return None
    return mosquitto_log.parse(message.topic, message.payload)


@dataclass(slots=True)
class Replay:
    """The messages of a resumed session up to the link's own new connection."""

    session_id: str  # the link's own client id
    messages: list[Message] = field(default_factory=list)
    complete: bool = False  # it holds the line of the link's own disconnection

    def take(self, message: Message) -> bool:
        """Hold one message; True when it is the line that ends the replay (settled: it is
        the link's own, with nothing to store)."""
        event = log_event(message)
        if isinstance(event, Connected) and event.client_id == self.session_id:
            message.settle()
            return True
        if isinstance(event, Ended | TakenOver) and event.client_id == self.session_id:
            self.complete = True  # the first line after the link left is here
        self.messages.append(message)
        return False
