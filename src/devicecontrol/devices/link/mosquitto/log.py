"""Mosquitto's own log, read off its ``$SYS/broker/log`` topics: who connected, who left,
who subscribed (the external-broker mode of contract §9, ``client.py``).

With ``log_dest topic`` Mosquitto publishes each log line on a topic named by its level. The
lines read here, as Mosquitto 2.0.11 writes them (each checked against the binary by
``tests/devices/link/test_mosquitto_broker.py``), after the timestamp of ``log_timestamp true``:

- ``$SYS/broker/log/N``: ``New client connected from 10.0.0.5:49152 as SN (p2, c1, k60,
  u'SN').``; ``Client SN disconnected.``, ``Client SN closed its connection.``, ``Client SN
  has exceeded timeout, disconnecting.``, ``Client SN been disconnected by administrative
  action.``, ``Client SN disconnected: <errno text>.``, ``Bad socket read/write on client
  SN: <reason>`` and the other ``Client SN disconnected ...`` lines (every end of an
  accepted connection);
- ``$SYS/broker/log/E``: ``Client SN already connected, closing old connection.`` (a
  take-over: the old connection ends with no line of its own);
- ``$SYS/broker/log/M/subscribe``: ``SN 1 devices/SN/commands`` (granted subscriptions only)
  and ``$SYS/broker/log/M/unsubscribe``: ``SN devices/SN/commands``.

A refused CONNECT ends as ``Client <unknown> disconnected, not authorised.``: the client id
of a connection that never proved itself is not written, so a stranger cannot end a
device's connection in the link's eyes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

NOTICE = "$SYS/broker/log/N"
ERROR = "$SYS/broker/log/E"
SUBSCRIBE = "$SYS/broker/log/M/subscribe"
UNSUBSCRIBE = "$SYS/broker/log/M/unsubscribe"
TOPICS = (NOTICE, ERROR, SUBSCRIBE, UNSUBSCRIBE)

_TIMESTAMP = re.compile(r"^\d+: ")  # log_timestamp true (the default), default format
_CONNECTED = re.compile(
    r"^New client connected from (?P<address>\S+) as (?P<client_id>\S+) "
    r"\(p(?P<protocol>\d+), c(?P<clean>[01]), k(?P<keepalive>\d+)(?:, u'(?P<username>.*)')?\)\.$"
)
_ENDED = re.compile(
    r"^(?:Client (?P<client_id>\S+) (?:disconnected|closed its connection|has exceeded timeout"
    r"|been disconnected)|Bad socket read/write on client (?P<bad_id>\S+):)"
)
_TAKEN_OVER = re.compile(r"^Client (?P<client_id>\S+) already connected, closing old connection")
_SUBSCRIBED = re.compile(r"^(?P<client_id>\S+) \d (?P<topic>.+)$")
_UNSUBSCRIBED = re.compile(r"^(?P<client_id>\S+) (?P<topic>.+)$")


@dataclass(frozen=True, slots=True)
class Connected:
    """A connection that proved its credentials (a take-over of ``client_id`` included)."""

    client_id: str
    username: str | None
    address: str
    clean_session: bool


@dataclass(frozen=True, slots=True)
class Ended:
    client_id: str


@dataclass(frozen=True, slots=True)
class TakenOver:
    """A new connection of ``client_id`` is closing the one it had (``Connected`` follows)."""

    client_id: str


@dataclass(frozen=True, slots=True)
class Subscribed:
    client_id: str
    topic: str


@dataclass(frozen=True, slots=True)
class Unsubscribed:
    client_id: str
    topic: str


LogEvent = Connected | Ended | TakenOver | Subscribed | Unsubscribed


def parse(topic: str, payload: bytes) -> LogEvent | None:
    """The event a log line tells of, or None for every other line."""
    line = payload.decode("utf-8", "replace").rstrip("\r\n")
    line = _TIMESTAMP.sub("", line, count=1)
    if topic == NOTICE:
        if match := _CONNECTED.match(line):
            return Connected(
                client_id=match["client_id"],
                username=match["username"],
                address=match["address"],
                clean_session=match["clean"] == "1",
            )
        if match := _ENDED.match(line):
            client_id = match["client_id"] or match["bad_id"]
            return None if client_id == "<unknown>" else Ended(client_id)
    elif topic == ERROR:
        if match := _TAKEN_OVER.match(line):
            return TakenOver(match["client_id"])
    elif topic == SUBSCRIBE:
        if match := _SUBSCRIBED.match(line):
            return Subscribed(match["client_id"], match["topic"])
    elif topic == UNSUBSCRIBE and (match := _UNSUBSCRIBED.match(line)):
        return Unsubscribed(match["client_id"], match["topic"])
    return None
