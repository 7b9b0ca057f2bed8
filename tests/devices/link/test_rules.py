"""Every rule of the device link, checked in memory: the link's core driven as a broker
drives it, through a fake ``ports.Broker`` (no socket, no database), and the small pieces
both adapters share (in-order acknowledgement, persistent sessions, outages). Each test
runs in milliseconds; the socket tests beside these check what only sockets prove."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from devicecontrol.clock import utcnow
from devicecontrol.config import MqttUrl, Settings, ThrottleRule
from devicecontrol.devices.identity import DeviceIdentity
from devicecontrol.devices.link import outbox as outbox_module
from devicecontrol.devices.link.acks import InOrderAcknowledgements
from devicecontrol.devices.link.core import DeviceLink
from devicecontrol.devices.link.identities import UNKNOWN_FOR_S, DeviceIdentities
from devicecontrol.devices.link.limits import CATCH_UP_FACTOR, CATCH_UP_MIN_S
from devicecontrol.devices.link.mosquitto.client import MosquittoBroker
from devicecontrol.devices.link.mosquitto.log import NOTICE, Connected, Ended, Subscribed
from devicecontrol.devices.link.mosquitto.replay import Replay
from devicecontrol.devices.link.mosquitto.shards import SESSION_ID
from devicecontrol.devices.link.mqtt_session.client import Message
from devicecontrol.devices.link.outage import Outage
from devicecontrol.devices.link.ports import DeviceConnection
from devicecontrol.devices.link.sessions import PersistentSessions, Resumed
from devicecontrol.devices.readings.service import MAX_PAYLOAD_BYTES
from devicecontrol.devices.topics import MessageKind
from tests.devices.link.support import metric

SERIAL, OTHER = "PLUG-R1", "PLUG-R2"
DROPPED = "devicecontrol_device_messages_dropped_total"


class FakeBroker:
    """A ``ports.Broker`` without sockets: it records what the link asks of it."""

    devices_outlive_link = False
    checks_secrets = True  # the link reads no secrets from a database here
    coordinates = True
    reports_every_connection = True
    session_expiry_s = 60.0
    ready = True
    port = None

    def __init__(self, link: DeviceLink) -> None:
        self.link = link
        self.where = {"listen": "in memory"}
        self.published: list[tuple[str, bytes]] = []
        self.closed: list[DeviceConnection] = []

    async def start(self) -> None:
        pass

    async def shutdown(self) -> None:
        pass

    async def publish(self, topic: str, payload: bytes) -> None:
        self.published.append((topic, payload))

    async def close_connection(self, connection: DeviceConnection) -> None:
        self.closed.append(connection)


class Recorder:
    """Stands in for a method of the link's parts: the calls it got."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        self.calls.append((*args, *kwargs.values()))


def identity(serial: str, controller_id: int = 1) -> DeviceIdentity:
    return DeviceIdentity(controller_id, serial, "smart_plug", secret_digest="digest")


@pytest.fixture
def link() -> DeviceLink:
    """The link's core on a fake broker; its deliveries and presence writes recorded, not
    run (they are the outbox's and ingest's, with a database)."""
    runtime = SimpleNamespace(settings=Settings(device_message_rate=ThrottleRule(3, 1)))
    core = DeviceLink(runtime, FakeBroker)  # type: ignore[arg-type]
    core.outbox.subscribed = Recorder()  # type: ignore[method-assign]
    core.ingest.presence = Recorder()  # type: ignore[method-assign]
    return core


def connect(link: DeviceLink, serial: str = SERIAL, controller_id: int = 1) -> DeviceConnection:
    """What a broker does once a device proved itself."""
    connection, previous = link.claim(identity(serial, controller_id), "10.0.0.5")
    assert previous is None
    link.connection_started(connection)
    return connection


# --- topics ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("topic", "kind"),
    [
        (f"devices/{SERIAL}/state", MessageKind.STATE),
        (f"devices/{SERIAL}/commands/result", MessageKind.RESULT),
        (f"devices/{OTHER}/state", None),
        (f"devices/{SERIAL}/commands", None),
        (f"devices/{SERIAL}/state/more", None),
        ("devices/+/state", None),
        ("elsewhere", None),
    ],
)
async def test_a_device_publishes_to_its_own_state_and_result_only(link, topic, kind):
    before = metric(DROPPED, reason="forbidden_topic")
    assert link.publication_kind(SERIAL, topic) == kind
    assert metric(DROPPED, reason="forbidden_topic") == before + (kind is None)


@pytest.mark.parametrize(
    ("topic_filter", "granted"),
    [
        (f"devices/{SERIAL}/commands", True),
        (f"devices/{OTHER}/commands", False),
        (f"devices/{SERIAL}/#", False),
        ("devices/+/commands", False),
        (f"devices/{SERIAL}/state", False),
    ],
)
async def test_a_device_subscribes_to_its_own_commands_topic_only(link, topic_filter, granted):
    connection = connect(link)
    assert link.subscribed(SERIAL, topic_filter) is granted
    assert connection.subscribed is granted
    assert link.outbox.subscribed.calls == ([(connection,)] if granted else [])


async def test_the_subscribe_filter_answers_for_a_device_not_connected(link):
    """A broker's SUBACK needs the answer even for a connection the link does not know."""
    assert link.subscribed(SERIAL, f"devices/{SERIAL}/commands")
    assert not link.subscribed(SERIAL, f"devices/{OTHER}/commands")
    assert link.outbox.subscribed.calls == []


async def test_unsubscribing_from_its_commands_stops_deliveries(link):
    connection = connect(link)
    link.subscribed(SERIAL, f"devices/{SERIAL}/commands")
    assert not link.unsubscribed(SERIAL, f"devices/{OTHER}/commands")
    assert connection.subscribed
    assert link.unsubscribed(SERIAL, f"devices/{SERIAL}/commands")
    assert not connection.subscribed


# --- messages ---------------------------------------------------------------------------


async def test_a_message_of_a_device_not_connected_is_not_taken(link):
    assert link.publication(SERIAL, MessageKind.STATE, b"{}") is None


async def test_a_payload_of_4_kib_is_queued_and_one_byte_more_is_dropped_at_once(link):
    connect(link)
    padding = MAX_PAYLOAD_BYTES - len(b'{"p": ""}')
    at_limit = b'{"p": "' + b"x" * padding + b'"}'
    before = metric(DROPPED, reason="too_large")
    queued = link.publication(SERIAL, MessageKind.STATE, at_limit)
    assert queued is not None and not queued.done()  # waits for the database
    too_large = link.publication(SERIAL, MessageKind.RESULT, at_limit + b" ")
    assert too_large is not None and too_large.done()  # acknowledged: nothing is owed
    assert metric(DROPPED, reason="too_large") == before + 1


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (b"not json", "not_json"),
        (b"[1, 2]", "not_an_object"),
        (b'{"a": ' * 40 + b"1" + b"}" * 40, "not_json"),
    ],
    ids=["not-json", "an-array", "nested-too-deep"],
)
async def test_a_payload_that_is_no_json_object_is_dropped_and_counted(link, payload, reason):
    connect(link)
    before = metric(DROPPED, reason=reason)
    stored = link.publication(SERIAL, MessageKind.STATE, payload)
    assert stored is not None and stored.done()
    assert metric(DROPPED, reason=reason) == before + 1


async def test_a_device_past_its_rate_loses_its_own_messages_only(link, clock):
    connect(link, SERIAL, 1)
    connect(link, OTHER, 2)
    before = metric(DROPPED, reason="rate_limited")
    taken = [link.publication(SERIAL, MessageKind.STATE, b"{}") for _ in range(4)]
    assert [t is not None for t in taken] == [True, True, True, False]  # 3 a second
    assert link.publication(OTHER, MessageKind.STATE, b"{}") is not None
    assert metric(DROPPED, reason="rate_limited") == before + 1
    clock.advance(1)
    assert link.publication(SERIAL, MessageKind.STATE, b"{}") is not None


async def test_a_bucket_that_refilled_is_forgotten(link, clock):
    connect(link)
    link.publication(SERIAL, MessageKind.STATE, b"{}")
    link.rate.forget_full()
    assert link.rate._buckets
    clock.advance(1)
    link.rate.forget_full()
    assert not link.rate._buckets


def take(link, serial: str, count: int) -> int:
    """How many of ``count`` messages of ``serial`` the link takes at once."""
    return sum(link.publication(serial, MessageKind.STATE, b"{}") is not None for _ in range(count))


def away(link, clock, seconds: float) -> None:
    """The link loses its broker for ``seconds``, and reads it again."""
    link.broker_lost()
    clock.advance(seconds)
    link.broker_back()


async def test_a_backlog_is_judged_over_the_time_the_link_was_away(link, clock):
    """After 10 s away at 3 a second: a burst of 3 and 30 more for each device, once."""
    connect(link, SERIAL, 1)
    connect(link, OTHER, 2)
    assert take(link, SERIAL, 3) == 3  # its bucket is empty when the link goes
    away(link, clock, 10)
    assert take(link, SERIAL, 40) == 3 + 30  # refilled to a burst, and the credit
    assert take(link, OTHER, 40) == 3 + 30  # a device not heard before gets it too
    clock.advance(1)
    assert take(link, SERIAL, 10) == 3  # the credit came once: the rate again


async def test_a_backlog_credit_lapses_and_no_bucket_is_forgotten_meanwhile(link, clock):
    connect(link)
    away(link, clock, 10)
    assert take(link, SERIAL, 1) == 1
    clock.advance(2)
    link.rate.forget_full()  # full, but forgotten it would be credited again
    assert take(link, SERIAL, 100) == 3 + 30 - 1
    clock.advance(CATCH_UP_MIN_S)  # past the catch-up (at least a minute)
    assert take(link, SERIAL, 100) == 3  # a burst again
    clock.advance(1)
    link.rate.forget_full()
    assert not link.rate._buckets


async def test_a_credit_unspent_when_the_catch_up_ends_lapses(link, clock):
    connect(link)
    away(link, clock, 10)
    assert take(link, SERIAL, 5) == 5
    clock.advance(max(CATCH_UP_MIN_S, CATCH_UP_FACTOR * 10) + 1)
    assert take(link, SERIAL, 100) == 3  # a burst, no more


# --- connections ----------------------------------------------------------------------


async def test_a_connection_is_online_until_it_ends(link):
    connection = connect(link)
    assert link.connections == {SERIAL: connection}
    link.connection_ended(connection)
    assert link.connections == {}
    assert connection.is_ended
    assert link.ingest.presence.calls == [(1, True), (1, False)]


async def test_a_take_over_keeps_the_device_online(link):
    """MQTT's take-over: the old connection ends, the device stays online, and only the
    new connection's end takes it offline."""
    first = connect(link)
    second, previous = link.claim(identity(SERIAL), "10.0.0.6")
    assert previous is first
    link.connection_started(second)
    link.connection_ended(first)
    assert first.is_ended
    assert link.connections == {SERIAL: second}
    assert link.ingest.presence.calls == [(1, True), (1, True)]
    link.connection_ended(second)
    assert link.connections == {}
    assert link.ingest.presence.calls[-1] == (1, False)


async def test_a_refused_socket_is_counted_by_reason(link):
    closed = "devicecontrol_device_connections_closed_total"
    before = metric(closed, reason="no_connect")
    link.connection_refused("no_connect", "10.0.0.7")
    assert metric(closed, reason="no_connect") == before + 1


# --- acknowledgements in arrival order ----------------------------------------------------


def test_acknowledgements_go_in_arrival_order_once_each_is_settled():
    sent: list[int] = []
    acks = InOrderAcknowledgements(sent.append)
    first, second, third = (acks.arrived(n) for n in (1, 2, 3))
    third.settle()
    second.settle()
    assert sent == []  # the first is not stored yet: nothing may overtake it
    first.settle()
    assert sent == [1, 2, 3]
    first.settle()
    assert sent == [1, 2, 3]  # settling twice sends nothing twice


async def test_an_acknowledgement_waits_for_its_message_to_be_stored():
    sent: list[str] = []
    acks = InOrderAcknowledgements(sent.append)
    stored: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    acks.when_stored(stored, "PUBACK 1")
    acks.when_stored(None, "PUBACK 2")  # dropped by a rule: nothing to wait for
    await asyncio.sleep(0)
    assert sent == []
    stored.set_result(None)
    await asyncio.sleep(0)
    assert sent == ["PUBACK 1", "PUBACK 2"]


# --- persistent sessions --------------------------------------------------------------


def test_a_resumed_persistent_session_keeps_its_commands_subscription(clock):
    sessions = PersistentSessions(expiry_s=60)
    assert sessions.connected(SERIAL, clean=False) == Resumed(present=False, subscribed=False)
    sessions.subscribed(SERIAL)
    sessions.ended(SERIAL)
    assert sessions.connected(SERIAL, clean=False) == Resumed(present=True, subscribed=True)
    sessions.unsubscribed(SERIAL)
    sessions.ended(SERIAL)
    assert sessions.connected(SERIAL, clean=False) == Resumed(present=True, subscribed=False)


def test_a_clean_session_ends_the_persistent_one(clock):
    sessions = PersistentSessions(expiry_s=60)
    sessions.connected(SERIAL, clean=False)
    sessions.subscribed(SERIAL)
    assert sessions.connected(SERIAL, clean=True) == Resumed(present=False, subscribed=False)
    sessions.subscribed(SERIAL)  # a clean session keeps nothing
    assert sessions.connected(SERIAL, clean=False) == Resumed(present=False, subscribed=False)


def test_a_persistent_session_gone_too_long_is_forgotten(clock):
    sessions = PersistentSessions(expiry_s=60)
    sessions.connected(SERIAL, clean=False)
    sessions.subscribed(SERIAL)
    sessions.ended(SERIAL)
    clock.advance(61)
    assert sessions.connected(SERIAL, clean=False) == Resumed(present=False, subscribed=False)


def test_a_broker_that_keeps_sessions_itself_never_forgets_them(clock):
    sessions = PersistentSessions(expiry_s=None)
    sessions.connected(SERIAL, clean=False)
    sessions.subscribed(SERIAL)
    sessions.ended(SERIAL)
    clock.advance(86_400 * 30)
    assert sessions.connected(SERIAL, clean=False).subscribed
    sessions.clear()  # the link lost track of the broker's record
    assert not sessions.connected(SERIAL, clean=False).present


# --- outages ------------------------------------------------------------------------------


def test_an_outage_is_logged_once_and_its_end_once(caplog):
    caplog.set_level(logging.INFO, logger="devicecontrol")
    outage = Outage("the device link cannot reach %s", ended="the device link reaches it again")
    assert outage.recovered() is False  # no outage: nothing to say
    for _ in range(3):
        try:
            raise ConnectionError("down")
        except ConnectionError:
            outage.failed("the database")
    assert outage.recovered() is True
    assert outage.recovered() is False
    said = [(r.getMessage(), bool(r.exc_info)) for r in caplog.records]
    assert said == [
        ("the device link cannot reach the database", True),
        ("the device link reaches it again", False),
    ]


def test_an_outage_without_an_end_line_says_nothing_when_it_ends(caplog):
    caplog.set_level(logging.INFO, logger="devicecontrol")
    outage = Outage("the device link cannot check device secrets")
    assert outage.failed(exc_info=False) is True
    assert outage.failed(exc_info=False) is False
    assert outage.recovered() is True
    assert outage.failed(exc_info=False) is True  # a new outage is said again
    assert [r.getMessage() for r in caplog.records] == [
        "the device link cannot check device secrets"
    ] * 2


# --- what Mosquitto's log tells the link ----------------------------------------------------


@pytest.fixture
def mosquitto(link) -> MosquittoBroker:
    """The Mosquitto adapter on the link's core, never connected: its log lines are handed
    to it as its session would, and it knows every client id as a registered device."""
    url = MqttUrl(tls=False, host="127.0.0.1", port=1, username="devicecontrol", password="x")
    broker = MosquittoBroker(link.reports, url, ca_file=None)

    async def registered(serial: str) -> DeviceIdentity:
        return identity(serial)

    link.reports.identities = DeviceIdentities(registered)
    return broker


def connected(serial: str, *, clean: bool) -> Connected:
    return Connected(serial, serial, "10.0.0.5:50000", clean_session=clean)


async def test_a_resumed_persistent_session_on_mosquitto_is_subscribed_again(link, mosquitto):
    """Mosquitto logs no subscription when a persistent session resumes: the link's record
    of the session says it holds one."""
    commands = f"devices/{SERIAL}/commands"
    await mosquitto._logged(connected(SERIAL, clean=False))
    await mosquitto._logged(Subscribed(SERIAL, commands))
    await mosquitto._logged(Ended(SERIAL))
    assert SERIAL not in link.connections
    await mosquitto._logged(connected(SERIAL, clean=False))
    assert link.connections[SERIAL].subscribed
    await mosquitto._logged(Ended(SERIAL))
    await mosquitto._logged(connected(SERIAL, clean=True))  # a clean session ends it
    assert not link.connections[SERIAL].subscribed


async def test_a_login_borrowing_a_serial_ends_that_devices_connection(link, mosquitto):
    await mosquitto._logged(connected(SERIAL, clean=True))
    await mosquitto._logged(Connected(SERIAL, "an-administrator", "10.0.0.9:1", True))
    assert SERIAL not in link.connections
    await mosquitto._logged(Ended(SERIAL))  # the borrower's end: nobody's device
    assert link.ingest.presence.calls == [(1, True), (1, False)]


def test_a_replay_is_complete_only_with_the_links_own_end():
    own_end = mosquitto_line(NOTICE, f"Client {SESSION_ID} disconnected.")
    own_connect = mosquitto_line(
        NOTICE, f"New client connected from 127.0.0.1:5 as {SESSION_ID} (p2, c0, k30, u'x')."
    )
    reading = Message(f"devices/{SERIAL}/state", b"{}")
    replay = Replay(SESSION_ID)
    assert not replay.take(reading)
    assert not replay.complete
    assert not replay.take(own_end)
    assert replay.complete
    assert replay.take(own_connect)  # the end of the replay, not held
    assert replay.messages == [reading, own_end]


async def test_a_client_id_that_is_no_device_is_looked_up_again_after_a_while(clock):
    looked_up: list[str] = []

    async def find_device(serial: str) -> DeviceIdentity | None:
        looked_up.append(serial)
        return None

    identities = DeviceIdentities(find_device)
    assert await identities.of(SERIAL) is None
    assert await identities.of(SERIAL) is None
    assert looked_up == [SERIAL]  # remembered as unknown
    assert await identities.of(SERIAL, fresh=True) is None  # a new login: looked up
    clock.advance(UNKNOWN_FOR_S + 1)
    assert await identities.of(SERIAL) is None
    assert looked_up == [SERIAL] * 3
    assert await identities.of("not a serial!") is None
    assert looked_up == [SERIAL] * 3


def mosquitto_line(topic: str, text: str) -> Message:
    return Message(topic, f"1795493416: {text}".encode())


async def test_an_attempt_that_fails_is_logged_once_and_not_raised(caplog):
    caplog.set_level(logging.INFO, logger="devicecontrol")
    outage = Outage("the device link's work fails", ended="the device link's work succeeds again")

    async def fails() -> None:
        raise ConnectionError("the database is down")

    async def works() -> None:
        pass

    assert [await outage.attempt(fails) for _ in range(3)] == [False] * 3
    assert await outage.attempt(works)
    assert [r.getMessage() for r in caplog.records] == [
        "the device link's work fails",
        "the device link's work succeeds again",
    ]


# --- deliveries -------------------------------------------------------------------------


class Commands:
    """The commands table, in memory, for the outbox: what each device has waiting, in
    the order they were made; published ones are no longer queued."""

    def __init__(self, broker: FakeBroker) -> None:
        self.broker = broker
        self.waiting: list[SimpleNamespace] = []
        self.reads = asyncio.Event()  # cleared: a delivery waits in its read
        self.reads.set()

    def make(self, name: str) -> None:
        expires_at = utcnow() + timedelta(minutes=5)
        self.waiting.append(SimpleNamespace(id=len(self.waiting) + 1, name=name,
                                            expires_at=expires_at))  # fmt: skip

    async def read(self, runtime: Any, device: DeviceIdentity) -> list[SimpleNamespace]:
        await self.reads.wait()
        published = {payload for _, payload in self.broker.published}
        return [c for c in self.waiting if c.name.encode() not in published]

    def published(self) -> list[str]:
        return [payload.decode() for _, payload in self.broker.published]


@pytest.fixture
def table(link, monkeypatch) -> Commands:
    """The link's outbox on the in-memory table (its reads and marks), delivering for real
    to the fake broker."""
    table = Commands(link.broker)

    async def mark_sent(runtime: Any, serial_number: str, command: SimpleNamespace) -> bool:
        return True

    monkeypatch.setattr(outbox_module, "_deliverable", table.read)
    monkeypatch.setattr(outbox_module, "_still_queued", table.read)
    monkeypatch.setattr(outbox_module.commands, "mark_sent", mark_sent)
    monkeypatch.setattr(outbox_module.commands, "delivery_payload", lambda c: c.name.encode())
    del link.outbox.subscribed  # the real one again
    return table


async def test_a_subscription_gets_what_waits_in_the_order_it_was_made(link, table):
    table.make("first")
    table.make("second")
    connect(link)
    link.outbox.command_made(1)  # not subscribed yet: nothing goes
    await link.mailbox.drained()
    assert table.published() == []
    link.subscribed(SERIAL, f"devices/{SERIAL}/commands")
    await link.mailbox.drained()
    assert table.published() == ["first", "second"]
    assert {topic for topic, _ in link.broker.published} == {f"devices/{SERIAL}/commands"}


async def test_commands_made_during_a_delivery_go_once_after_it(link, table):
    table.make("first")
    connect(link)
    table.reads.clear()
    link.subscribed(SERIAL, f"devices/{SERIAL}/commands")
    await asyncio.sleep(0)  # the delivery waits in its read
    table.make("second")
    link.outbox.command_made(1)
    link.outbox.command_made(1)
    table.reads.set()
    await link.mailbox.drained()
    assert table.published() == ["first", "second"]


async def test_a_delivery_that_failed_half_way_goes_again_once_the_broker_is_back(
    link, table, caplog
):
    caplog.set_level(logging.INFO, logger="devicecontrol")
    table.make("first")
    connect(link)

    async def out_of_reach(topic: str, payload: bytes) -> None:
        raise ConnectionError("the MQTT broker is out of reach")

    publish, link.broker.publish = link.broker.publish, out_of_reach
    link.subscribed(SERIAL, f"devices/{SERIAL}/commands")
    await link.mailbox.drained()
    assert table.published() == []
    link.broker.publish = publish
    link.broker_ready()
    await link.mailbox.drained()
    assert table.published() == ["first"]
    assert sum("work fails" in r.getMessage() for r in caplog.records) == 1
