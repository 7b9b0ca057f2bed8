"""The check that Mosquitto publishes its log, run on each new connection of the session
that reads it (``client.py``): a probe client connects and subscribes, and its two log
lines must come back within ``LOG_CHECK_S``. A broker that does not publish its log would
otherwise leave every device offline, silently.
"""

from __future__ import annotations

import asyncio
import ssl

import aiomqtt

from devicecontrol.config import MqttUrl
from devicecontrol.devices.link.mosquitto import log as mosquitto_log
from devicecontrol.devices.link.mosquitto.dynsec import RESPONSE_TOPIC
from devicecontrol.devices.link.mosquitto.log import Connected, LogEvent, Subscribed
from devicecontrol.devices.link.mosquitto.shards import SESSION_ID
from devicecontrol.devices.link.mqtt_session.client import Message
from devicecontrol.devices.link.mqtt_session.kept import TIMEOUT_S
from devicecontrol.devices.link.ports import LinkError

__all__ = ["PROBE_ID", "LogCheck"]

PROBE_ID = f"{SESSION_ID}-probe"
LOG_CHECK_S = 10


class LogCheck:
    """``check`` and ``peek`` of the kept connection (``mqtt_session/kept.py``)."""

    def __init__(self, url: MqttUrl, tls: ssl.SSLContext | None) -> None:
        self.url = url
        self._tls = tls
        self._probe_lines: set[type[LogEvent]] = set()
        self._probe_seen = asyncio.Event()

    async def check(self) -> None:
        """The probe's connect and subscribe lines come back within ``LOG_CHECK_S``."""
        self._probe_lines.clear()
        self._probe_seen.clear()
        async with aiomqtt.Client(
            self.url.host,
            self.url.port,
            identifier=PROBE_ID,
            username=self.url.username,
            password=self.url.password,
            clean_session=True,
            tls_context=self._tls,
            timeout=TIMEOUT_S,
        ) as probe:
            await probe.subscribe(RESPONSE_TOPIC, qos=0)
        try:
            async with asyncio.timeout(LOG_CHECK_S):
                await self._probe_seen.wait()
        except TimeoutError:
            raise LinkError(
                f"the MQTT broker at {self.url} does not publish its log of connections and "
                "subscriptions on $SYS/broker/log (log_dest topic, log_type notice, subscribe "
                "and unsubscribe, connection_messages true: docs/OPERATIONS.md)"
            ) from None

    def peek(self, message: Message) -> None:
        """The probe's lines, noticed on arrival: the log check must not wait for a long
        replay to be taken in."""
        if message.topic in (mosquitto_log.NOTICE, mosquitto_log.SUBSCRIBE):
            event = mosquitto_log.parse(message.topic, message.payload)
            if event is not None and event.client_id == PROBE_ID:
                self._probe_lines.add(type(event))
                if {Connected, Subscribed} <= self._probe_lines:
                    self._probe_seen.set()
