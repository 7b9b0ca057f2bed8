"""The link's session connection, kept up: connect (each connection subscribes to what
its plan says and unsubscribes from the rest), run the adapter's check of the broker, and
connect again with a growing delay whenever the connection is lost, logging the loss once.

The first connection's failure is the link's one-line ``LinkError``; later ones leave
``online`` as it was (unknown, not changed).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Protocol

from devicecontrol.config import MqttUrl
from devicecontrol.devices.link.mqtt_session.client import (
    Message,
    SessionBegan,
    SessionClient,
    SessionError,
)
from devicecontrol.devices.link.mqtt_session.connection import (
    one_line,
    subscription_refused,
    tls_context,
)
from devicecontrol.devices.link.outage import Outage
from devicecontrol.devices.link.ports import LinkError
from devicecontrol.observability.logs import emit

__all__ = ["TIMEOUT_S", "KeptConnection", "SessionPlan", "cancelled"]

TIMEOUT_S = 10  # the broker's CONNACK, SUBACK, PUBACK
FIRST_RETRY_S = 1.0
MAX_RETRY_S = 30.0
logger = logging.getLogger("devicecontrol.devices.link")


class SessionPlan(Protocol):
    """A session's client id, what each of its connections subscribes to (at QoS 1) and
    what it unsubscribes from (what a kept session may still hold and should not)."""

    @property
    def client_id(self) -> str: ...

    @property
    def subscribe(self) -> tuple[str, ...]: ...

    @property
    def unsubscribe(self) -> tuple[str, ...]: ...


# run on each new connection once subscribed: the adapter's check of its broker (a
# ``LinkError`` when the broker is not set up as the link needs)
Check = Callable[[], Awaitable[None]]


class KeptConnection:
    """The link's session connection; ``client`` while connected. Everything the session
    receives goes to ``inbox``; ``lost`` is called whenever a connection ends."""

    def __init__(
        self,
        url: MqttUrl,
        *,
        plan: SessionPlan,
        ca_file: str | None,
        keepalive_s: int,
        inbox: asyncio.Queue[SessionBegan | Message],
        lost: Callable[[], None],
        check: Check | None = None,
        peek: Callable[[Message], None] | None = None,
    ) -> None:
        self.url = url
        self.plan = plan
        self.keepalive_s = keepalive_s
        self.client: SessionClient | None = None
        self._up = asyncio.Event()  # set while ``client`` is
        self.tls = tls_context(url, ca_file)
        self._inbox = inbox
        self._lost = lost
        self._check = check
        self._peek = peek or _nothing
        self._outage = Outage(
            "the device link lost the MQTT broker at %s (%s); reconnecting, devices' online "
            "left as it was meanwhile"
        )

    async def run(self, first: asyncio.Future[None]) -> None:
        """Stay connected; ``first`` is done once the first connection is up (or failed,
        with its ``LinkError``: then this returns)."""
        delay = FIRST_RETRY_S
        while True:
            client = self._new_client()
            try:
                async with client:
                    await self._begin(client)
                    if not first.done():
                        first.set_result(None)
                    if self._outage.recovered():
                        emit(logger, logging.INFO, {"event": "device_link_broker_back",
                                                    "broker": str(self.url)})  # fmt: skip
                    delay = FIRST_RETRY_S
                    await client.ended()  # what it receives goes to the inbox meanwhile
            except (SessionError, LinkError, TimeoutError) as exc:
                reason = one_line(exc.__cause__ or exc)
                if not first.done():
                    if not isinstance(exc, LinkError):
                        exc = LinkError(
                            f"cannot connect to the MQTT broker at {self.url} "
                            f"(DEVICECONTROL_MQTT_URL): {reason}"
                        )
                    first.set_exception(exc)
                    return
                self._outage.failed(self.url, reason, exc_info=False)
            finally:
                self.client = None
                self._up.clear()
                self._lost()
            await asyncio.sleep(delay)
            delay = min(delay * 2, MAX_RETRY_S)

    def _new_client(self) -> SessionClient:
        return SessionClient(
            self.url.host,
            self.url.port,
            client_id=self.plan.client_id,
            username=self.url.username,
            password=self.url.password,
            keepalive_s=self.keepalive_s,
            tls=self.tls,
            timeout_s=TIMEOUT_S,
            inbox=self._inbox,
            peek=self._peek,
        )

    async def connected_client(self, within_s: float) -> SessionClient | None:
        """The client, waiting up to ``within_s`` for a connection being made. The broker's
        CONNACK starts the session's replay, which can end (and the outbox deliver) before
        the connection's context is entered and ``client`` is set."""
        if self.client is None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(within_s):
                    await self._up.wait()
        return self.client

    async def _begin(self, client: SessionClient) -> None:
        """Subscribe (again, if the session was kept: what it holds may have changed),
        unsubscribe from what it should not hold; then the adapter's check."""
        self.client = client
        self._up.set()
        wanted = self.plan.subscribe
        granted = await client.subscribe([(topic, 1) for topic in wanted])
        refused = [
            topic for topic, code in zip(wanted, granted, strict=True) if subscription_refused(code)
        ]
        if refused:
            raise LinkError(
                f"the MQTT broker at {self.url} does not let the service's user subscribe "
                f"to {', '.join(refused)} (its role: docs/OPERATIONS.md)"
            )
        if self.plan.unsubscribe:
            await client.unsubscribe(list(self.plan.unsubscribe))
        if self._check is not None:
            await self._check()

    async def leave(self, topic_filters: tuple[str, ...]) -> None:
        """Unsubscribe now, if connected: once this returns, every message the broker
        routed to the session before has been received (it sends in order)."""
        if topic_filters and self.client is not None:
            with contextlib.suppress(SessionError, TimeoutError):
                await self.client.unsubscribe(list(topic_filters))


def _nothing(message: Message) -> None:
    """No peek: messages are taken in from the inbox only."""


async def cancelled(task: asyncio.Task[None]) -> None:
    """Cancel ``task`` and wait for its end."""
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
