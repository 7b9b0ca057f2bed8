"""amqtt plugins that hand the broker's decisions and events to the device link.

Configured by class path in ``broker.broker_config``; each gets the ``ports.Link`` in its
config. They hold no rules: identity, topics and message handling are the link's.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from amqtt.broker import BrokerContext
from amqtt.contexts import Action
from amqtt.plugins.base import BaseAuthPlugin, BasePlugin, BaseTopicPlugin
from amqtt.session import ApplicationMessage, Session

from devicecontrol.devices import topics
from devicecontrol.devices.identity import DeviceIdentity
from devicecontrol.devices.link.ports import Link

# what a session carries: the identity its CONNECT proved, and the link's connection
IDENTITY = "devicecontrol.identity"
CONNECTION = "devicecontrol.connection"
logger = logging.getLogger("devicecontrol.devices.link")


@dataclass
class LinkConfig:
    link: Link


def identity_of(session: Session | None) -> DeviceIdentity | None:
    identity = None if session is None else session.attributes.get(IDENTITY)
    return identity if isinstance(identity, DeviceIdentity) else None


class DeviceAuthPlugin(BaseAuthPlugin):
    """A device's CONNECT against its stored secret (``identity.authenticate_device``).

    amqtt asks twice per connection; the second time the session already carries what
    the first proved, and the database is not asked again.
    """

    Config = LinkConfig

    async def authenticate(self, *, session: Session) -> bool:
        if IDENTITY in session.attributes:
            return True
        identity = await self.config.link.authenticate(
            client_id=session.client_id,
            username=session.username,
            password=session.password,
            address=session.remote_address or "",
        )
        if identity is None:
            return False
        session.attributes[IDENTITY] = identity
        return True


class DeviceTopicPlugin(BaseTopicPlugin):
    """A device publishes to its own state and result topics, subscribes to (and so
    receives) its own commands topic; nothing else."""

    Config = LinkConfig

    async def topic_filtering(
        self, *, session: Session | None = None, topic: str | None = None, action: Any = None
    ) -> bool:
        identity = identity_of(session)
        if identity is None or topic is None:
            return False
        serial_number = identity.serial_number
        if action == Action.PUBLISH:
            if topics.publication_kind(serial_number, topic) is not None:
                return True
            self.config.link.publication_refused(serial_number)
            return False
        return topics.may_subscribe(serial_number, topic)  # SUBSCRIBE and RECEIVE


class DeviceEventsPlugin(BasePlugin[BrokerContext]):
    """Subscriptions and accepted publications, passed on to the link.

    amqtt runs these as tasks whose failures it drops silently: each is caught and logged.
    """

    Config = LinkConfig

    async def on_broker_client_connected(self, *, client_id: str, client_session: Session) -> None:
        """A resumed persistent session may already hold the commands subscription."""
        topic = topics.commands_topic(client_id)
        held = self.context.subscriptions.get(topic, [])
        if any(session.client_id == client_id for session, _ in held):
            _tell(self.config.link.subscribed, client_id, topic)

    async def on_broker_client_subscribed(self, *, client_id: str, topic: str, qos: int) -> None:
        _tell(self.config.link.subscribed, client_id, topic)

    async def on_broker_client_unsubscribed(self, *, client_id: str, topic: str) -> None:
        _tell(self.config.link.unsubscribed, client_id, topic)

    async def on_broker_message_broadcast(
        self, *, client_id: str, message: ApplicationMessage
    ) -> None:
        """QoS 2 messages only: QoS 0 and 1 reach the link from the protocol handler."""
        data = bytes(message.data or b"")
        _tell(self.config.link.publication, client_id, message.topic, data)


def _tell(call: Callable[..., object], *args: Any) -> None:
    try:
        call(*args)
    except Exception:
        logger.exception("the device link failed on a broker event (%s)", call.__name__)
