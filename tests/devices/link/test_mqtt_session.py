"""The link's kept MQTT session (``mqtt_session/client.py``) against a private Mosquitto: the
broker's session-present flag, no PUBACK before a message is settled (so an unsettled one
comes again, marked a redelivery, and a settled one does not), and its failures told as
``SessionError``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiomqtt
import pytest

from devicecontrol.devices.link.mqtt_session.client import (
    Message,
    SessionBegan,
    SessionClient,
    SessionError,
)
from tests.mosquitto import Mosquitto, private_mosquitto
from tests.processes import free_port

TOPIC = "devices/SESSION-1/state"
WITHIN_S = 5.0


def session(port: int, inbox: asyncio.Queue[SessionBegan | Message]) -> SessionClient:
    return SessionClient(
        "127.0.0.1",
        port,
        client_id="devicecontrol-link-test",
        username=None,
        password=None,
        keepalive_s=30,
        tls=None,
        timeout_s=WITHIN_S,
        inbox=inbox,
        peek=lambda message: None,
    )


async def next_item(inbox: asyncio.Queue[SessionBegan | Message]) -> SessionBegan | Message:
    return await asyncio.wait_for(inbox.get(), WITHIN_S)


async def publish(broker: Mosquitto, *payloads: bytes) -> None:
    async with aiomqtt.Client("127.0.0.1", broker.port, identifier="publisher") as publisher:
        for payload in payloads:
            await publisher.publish(TOPIC, payload, qos=1)


@pytest.fixture
def broker(tmp_path: Path):
    with private_mosquitto(tmp_path) as mosquitto:
        yield mosquitto


async def test_the_broker_says_whether_it_kept_the_session(broker):
    inbox: asyncio.Queue[SessionBegan | Message] = asyncio.Queue()
    async with session(broker.port, inbox) as first:
        await first.subscribe([(TOPIC, 1)])
    assert await next_item(inbox) == SessionBegan(present=False)
    async with session(broker.port, inbox):
        pass
    assert await next_item(inbox) == SessionBegan(present=True)


async def test_an_unsettled_message_comes_again_as_a_redelivery_and_a_settled_one_does_not(
    broker,
):
    inbox: asyncio.Queue[SessionBegan | Message] = asyncio.Queue()
    async with session(broker.port, inbox) as first:
        [granted] = await first.subscribe([(TOPIC, 1)])
        assert granted.value == 1
        await next_item(inbox)  # its beginning
        await publish(broker, b"settled", b"left")
        settled, left = await next_item(inbox), await next_item(inbox)
        assert isinstance(settled, Message) and isinstance(left, Message)
        assert (settled.payload, left.payload) == (b"settled", b"left")
        assert not settled.redelivery and not left.redelivery
        settled.settle()
        await first.unsubscribe(["nothing/else"])  # answered after the PUBACK just queued
    async with session(broker.port, inbox):
        began, again = await next_item(inbox), await next_item(inbox)
        assert began == SessionBegan(present=True)
        assert isinstance(again, Message)
        assert (again.payload, again.redelivery) == (b"left", True)
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(inbox.get(), 0.5)


async def test_a_connection_that_cannot_be_made_or_ends_is_a_session_error(broker):
    inbox: asyncio.Queue[SessionBegan | Message] = asyncio.Queue()
    with pytest.raises(SessionError) as refused:
        async with session(free_port(), inbox):
            pass
    assert "refused" in str(refused.value).lower()
    client = session(broker.port, inbox)
    async with client:
        broker.stop()
        with pytest.raises(SessionError):
            await asyncio.wait_for(client.ended(), WITHIN_S)
        with pytest.raises(SessionError):
            await client.publish(TOPIC, b"nowhere")
