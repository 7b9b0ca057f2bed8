"""What the hook answers a broker: who may connect and which topics each may use. The
same identity (``identity.py``: digests, throttles, rotation) and topic rules
(``topics.py``) as the embedded broker's; nothing here is cached, so a rotated secret is
refused at the next question.

Two kinds of account ask: a device (username = client id = its serial number, password =
its device secret) and the service's own link (the user and password of
``DEVICECONTROL_MQTT_URL``), allowed what the link needs.
"""

from __future__ import annotations

import hashlib
import hmac

from devicecontrol.config import Settings
from devicecontrol.controllers.identity import is_serial_number
from devicecontrol.devices import identity, topics
from devicecontrol.runtime import Runtime


def is_link(settings: Settings, username: str) -> bool:
    """The service's own broker account (the user of ``DEVICECONTROL_AMQP_URL`` or
    ``DEVICECONTROL_MQTT_URL``)."""
    link = settings.link_account
    return link is not None and _same(username, link.username)


def _same(presented: str, expected: str) -> bool:
    # digests first: the comparison takes the same time whatever the lengths
    return hmac.compare_digest(
        hashlib.sha256(presented.encode("utf-8", "surrogatepass")).digest(),
        hashlib.sha256(expected.encode("utf-8", "surrogatepass")).digest(),
    )


async def may_connect(
    runtime: Runtime,
    *,
    client_id: str | None,
    username: str,
    password: str,
    address: str | None,
) -> bool:
    """The link with its password, or a device that proves its secret (throttled per
    address when the broker says where the device is)."""
    link = runtime.settings.link_account
    if link is not None and is_link(runtime.settings, username):
        return _same(password, link.password)
    device = await identity.authenticate_device(
        runtime, client_id=client_id, username=username, password=password, address=address
    )
    return device is not None


def _device(username: str, client_id: str | None) -> bool:
    return is_serial_number(username) and client_id in (None, username)


def may_publish(settings: Settings, username: str, topic: str, client_id: str | None) -> bool:
    """A device to its own ``state`` and ``commands/result``; the link, commands."""
    if is_link(settings, username):
        return topics.link_may_publish(topic)
    return _device(username, client_id) and topics.publication_kind(username, topic) is not None


def may_subscribe(
    settings: Settings, username: str, topic_filter: str, client_id: str | None
) -> bool:
    """A device to its own ``commands``, spelled out; the link, the devices' publications
    and the broker's events."""
    if is_link(settings, username):
        return topics.link_may_subscribe(topic_filter)
    return _device(username, client_id) and topics.may_subscribe(username, topic_filter)
