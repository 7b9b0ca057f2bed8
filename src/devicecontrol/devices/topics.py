"""The device link's topics (contract §9) and the rule on them: a device uses its own only.

A device publishes readings to ``devices/<sn>/state`` and results to
``devices/<sn>/commands/result``, and subscribes to ``devices/<sn>/commands``, where the
service publishes its commands. Any other topic, wildcard filters included, is refused.
"""

from __future__ import annotations

from enum import StrEnum

from devicecontrol.controllers.identity import is_serial_number


class MessageKind(StrEnum):
    """What a device's publication is: a reading, or a command's result."""

    STATE = "state"
    RESULT = "result"


# what the device link subscribes to on a broker, for every device (a shared subscription's
# ``$share/<group>/`` before either is the same filter)
DEVICE_PUBLICATIONS = ("devices/+/state", "devices/+/commands/result")
SHARED = "$share/"
BROKER_EVENTS = "$SYS/"  # a broker's own topics: who connected and left

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


def link_may_publish(topic: str) -> bool:
    """The link publishes commands, to one device's commands topic at a time."""
    device = commanded_device(topic)
    return device is not None and is_serial_number(device)


def link_may_subscribe(topic_filter: str) -> bool:
    """The devices' publications (shared or not) and the broker's own events."""
    if topic_filter.startswith(BROKER_EVENTS):
        return True
    if topic_filter.startswith(SHARED):
        group, _, topic_filter = topic_filter[len(SHARED) :].partition("/")
        if not group:
            return False
    return topic_filter in DEVICE_PUBLICATIONS
