"""The device link's topics (contract §9) and the rule on them: a device uses its own only.

A device publishes readings to ``devices/<sn>/state`` and results to
``devices/<sn>/commands/result``, and subscribes to ``devices/<sn>/commands``, where the
service publishes its commands. Any other topic, wildcard filters included, is refused.
"""

from __future__ import annotations

from enum import StrEnum


class MessageKind(StrEnum):
    """What a device's publication is: a reading, or a command's result."""

    STATE = "state"
    RESULT = "result"


# what a device's publication is, by the last part of its topic
_PUBLICATIONS = {"state": MessageKind.STATE, "commands/result": MessageKind.RESULT}


def commands_topic(serial_number: str) -> str:
    return f"devices/{serial_number}/commands"


def commanded_device(topic: str) -> str | None:
    """The serial number whose commands topic ``topic`` is, else None."""
    device, rest = _device_topic(topic)
    return device if rest == ("commands",) else None


def state_topic(serial_number: str) -> str:
    return f"devices/{serial_number}/state"


def result_topic(serial_number: str) -> str:
    return f"devices/{serial_number}/commands/result"


def publication_kind(serial_number: str, topic: str) -> MessageKind | None:
    """What the device's publication on ``topic`` is; None: not one of its own topics."""
    prefix = f"devices/{serial_number}/"
    if not topic.startswith(prefix):
        return None
    return _PUBLICATIONS.get(topic[len(prefix) :])


def publisher_of(topic: str) -> str | None:
    """The serial number in a device publication topic (``devices/+/state`` or
    ``devices/+/commands/result``), else None."""
    device, rest = _device_topic(topic)
    return device if rest in (("state",), ("commands", "result")) else None


def _device_topic(topic: str) -> tuple[str | None, tuple[str, ...]]:
    """``devices/<sn>/...`` split into the serial number and the rest; (None, ()) for any
    other topic."""
    parts = topic.split("/")
    if len(parts) < 3 or parts[0] != "devices" or not parts[1]:
        return None, ()
    return parts[1], tuple(parts[2:])


def may_subscribe(serial_number: str, topic_filter: str) -> bool:
    """Only the device's own commands topic, spelled out (no wildcards)."""
    return topic_filter == commands_topic(serial_number)
