"""Which session each link process keeps on Mosquitto when several share the devices'
messages (``DEVICECONTROL_LINK_SHARD=I/N``).

One link (N = 1) subscribes to the devices' topics as they are. Several subscribe to them
as MQTT shared subscriptions of one group (``$share/devicecontrol/...``): Mosquitto hands
each message to one member of the group, in turn. Every link has a persistent session of
its own: shard 0 keeps ``devicecontrol-link`` and reads the broker's log (who is
connected); shard I > 0 is ``devicecontrol-link-I`` and reads the devices' messages only.

A session is persistent, so the broker remembers what it subscribed to before: each
connection subscribes to the current form and unsubscribes from the other, or a link whose
N went from 1 to 2 (or back) would get the messages twice, or some outside the group.
"""

from __future__ import annotations

from dataclasses import dataclass

from devicecontrol.devices import topics
from devicecontrol.devices.link.mosquitto import log as mosquitto_log

__all__ = ["GROUP", "SESSION_ID", "SessionPlan", "is_link_client", "session_plan", "shared"]

SESSION_ID = "devicecontrol-link"  # shard 0's persistent session, and the prefix of them all
GROUP = "devicecontrol"  # the shared subscriptions' group


def shared(topic_filter: str) -> str:
    """``topic_filter`` as a shared subscription of the links' group."""
    return f"{topics.SHARED}{GROUP}/{topic_filter}"


SHARED_PUBLICATIONS = tuple(shared(topic) for topic in topics.DEVICE_PUBLICATIONS)


def is_link_client(client_id: str) -> bool:
    """A client id of the link's own (a shard's session, the probe): never a device's."""
    return client_id == SESSION_ID or client_id.startswith(f"{SESSION_ID}-")


@dataclass(frozen=True, slots=True)
class SessionPlan:
    """One link process's session: its client id, what each connection subscribes to and
    unsubscribes from, and whether it reads (and checks) the broker's log."""

    client_id: str
    subscribe: tuple[str, ...]
    unsubscribe: tuple[str, ...]
    reads_log: bool

    @property
    def shared(self) -> tuple[str, ...]:
        """Its subscriptions to the devices' messages as a member of the links' group."""
        return tuple(topic for topic in self.subscribe if topic in SHARED_PUBLICATIONS)


def session_plan(shard: tuple[int, int]) -> SessionPlan:
    """The session of shard I of N (``DEVICECONTROL_LINK_SHARD``)."""
    index, count = shard
    devices: tuple[str, ...] = topics.DEVICE_PUBLICATIONS
    other_form: tuple[str, ...] = SHARED_PUBLICATIONS
    if count > 1:
        devices, other_form = other_form, devices
    if index == 0:
        return SessionPlan(SESSION_ID, (*mosquitto_log.TOPICS, *devices), other_form, True)
    return SessionPlan(f"{SESSION_ID}-{index}", devices, other_form, False)
