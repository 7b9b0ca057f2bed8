"""Contract §9 Limits, played as a hostile device plays them: raw bytes over a real socket.

Packets are built with amqtt's own packet classes where they are valid MQTT, and as bytes
only where the point is that they are not. The broker runs in this process, so "the
broker process's memory" is this process's resident set, read from /proc before and after.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Iterable

import msgspec
import pytest
from amqtt.mqtt.publish import PublishPacket
from amqtt.mqtt.pubrel import PubrelPacket

from devicecontrol.devices.link.device_log import DeviceEventLog
from devicecontrol.devices.link.endpoint import broker as broker_module
from devicecontrol.devices.link.endpoint.broker import MAX_UNFINISHED_QOS2
from devicecontrol.devices.link.listener import granted_keep_alive
from devicecontrol.devices.readings.service import MAX_PAYLOAD_DEPTH
from devicecontrol.runtime import Runtime
from tests.conftest import SQLITE_ENOUGH
from tests.devices.link.support import (
    SECRET,
    RawDevice,
    eventually,
    is_offline,
    is_online,
    metric,
    provision,
    running_link,
    stored_readings,
)

pytestmark = SQLITE_ENOUGH

SERIAL = "PLUG-1"
STATE = f"devices/{SERIAL}/state"
CLOSED = "devicecontrol_device_connections_closed_total"
DROPPED = "devicecontrol_device_messages_dropped_total"
MiB = 1024 * 1024


def resident_bytes() -> int:
    """This process's resident set (VmRSS), in bytes."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS in /proc/self/status")


class Counts:
    """A counter's values when the test began, per reason: tests share the process."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.before = {r: metric(name, reason=r) for r in REASONS}

    def since(self, reason: str) -> float:
        return metric(self.name, reason=reason) - self.before[reason]


REASONS = ("unfinished_qos2", "packet_too_large", "malformed_packet", "no_connect", "not_json")


def publish(topic: str, payload: bytes, *, qos: int = 0, packet_id: int | None = None) -> bytes:
    return PublishPacket.build(topic, payload, packet_id, False, qos, False).to_bytes()


async def send_until_closed(raw: RawDevice, chunks: Iterable[bytes]) -> int:
    """Write ``chunks`` while the broker lets us; the bytes it took before it closed."""
    sent = 0
    try:
        for chunk in chunks:
            raw.writer.write(chunk)
            await raw.writer.drain()
            sent += len(chunk)
    except ConnectionError:
        pass
    return sent


async def test_qos2_publishes_never_released_close_the_connection_and_hold_no_memory(runtime):
    closed = Counts(CLOSED)
    await provision(runtime, SERIAL)
    async with running_link(runtime) as link:
        raw, code = await RawDevice.connect(link.port, SERIAL)
        assert code == 0
        payload = b"x" * 12_000  # under the packet limit; amqtt kept every one of them
        offered = 6000 * len(publish(STATE, payload, qos=2, packet_id=1))
        before = resident_bytes()
        packets = (publish(STATE, payload, qos=2, packet_id=i) for i in range(1, 6001))
        sent = await send_until_closed(raw, packets)
        assert await raw.closed_by_broker(within=5)
        assert sent < offered  # the broker stopped taking them
        assert closed.since("unfinished_qos2") == 1
        await eventually(lambda: is_offline(runtime, SERIAL))
        # 70 MB offered: what the broker holds afterwards is a few MB at most
        assert resident_bytes() - before < 20 * MiB


async def test_qos2_released_in_time_is_no_hoarding(runtime):
    closed = Counts(CLOSED)
    await provision(runtime, SERIAL)
    async with running_link(runtime) as link:
        raw, _ = await RawDevice.connect(link.port, SERIAL)
        for packet_id in range(1, 3 * MAX_UNFINISHED_QOS2):
            raw.writer.write(publish(STATE, b'{"temp": 1}', qos=2, packet_id=packet_id))
            raw.writer.write(PubrelPacket.build(packet_id).to_bytes())
        await raw.writer.drain()
        await eventually(lambda: is_online(runtime, SERIAL))
        answers = b""  # PUBREC and PUBCOMP for each, and the connection stays open
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.5):
                while chunk := await raw.reader.read(4096):
                    answers += chunk
        assert len(answers) == 2 * 4 * (3 * MAX_UNFINISHED_QOS2 - 1)
        assert closed.since("unfinished_qos2") == 0


async def test_an_oversized_packet_is_refused_from_its_fixed_header(runtime):
    closed = Counts(CLOSED)
    await provision(runtime, SERIAL)
    async with running_link(runtime) as link:
        raw, _ = await RawDevice.connect(link.port, SERIAL)
        before = resident_bytes()
        # a PUBLISH announcing 250 MB (remaining length 0xFF 0xFF 0xFF 0x77), then its body
        header = bytes([0x30, 0xFF, 0xFF, 0xFF, 0x77])
        sent = await send_until_closed(raw, [header] + [b"\x00" * MiB] * 64)
        assert await raw.closed_by_broker(within=5)
        assert sent < 64 * MiB
        assert closed.since("packet_too_large") == 1
        assert resident_bytes() - before < 20 * MiB


async def test_the_packet_limit_is_a_setting(settings):
    closed = Counts(CLOSED)
    runtime = Runtime.from_settings(dataclasses.replace(settings, mqtt_max_packet=8192))
    try:
        await provision(runtime, SERIAL)
        async with running_link(runtime) as link:
            raw, _ = await RawDevice.connect(link.port, SERIAL)
            raw.writer.write(publish(STATE, b'{"a": "' + b"x" * 9000 + b'"}', qos=0))
            assert await raw.closed_by_broker(within=5)
            assert closed.since("packet_too_large") == 1
    finally:
        await runtime.close()


async def test_a_wildcard_in_a_publish_topic_closes_and_its_payload_is_never_a_packet(runtime):
    closed = Counts(CLOSED)
    await provision(runtime, SERIAL)
    async with running_link(runtime) as link:
        raw, _ = await RawDevice.connect(link.port, SERIAL)
        hidden = publish(STATE, b'{"smuggled": true}')  # a whole PUBLISH, as the payload
        wildcard = publish(f"devices/{SERIAL}/X", hidden).replace(b"/X", b"/+", 1)
        raw.writer.write(wildcard)
        raw.writer.write(publish(STATE, b'{"after": true}'))
        await raw.writer.drain()
        assert await raw.closed_by_broker(within=5)
        assert closed.since("malformed_packet") == 1
        await asyncio.sleep(0.3)  # what would have been stored is stored by now
        assert await stored_readings(runtime, SERIAL) == []


@pytest.mark.parametrize(
    "packet",
    [
        bytes([0x30, 0x80, 0x80, 0x80, 0x80, 0x01]),  # a remaining length of five bytes
        bytes([0xF0, 0x00]),  # packet type 15, reserved
        bytes([0x00, 0x00]),  # packet type 0, reserved
        bytes([0x36, 0x05, 0x00, 0x01, 0x61, 0x00, 0x01]),  # QoS 3
        bytes([0x30, 0x03, 0x00, 0x09, 0x61]),  # a topic longer than its packet
    ],
    ids=["bad length", "type 15", "type 0", "qos 3", "short topic"],
)
async def test_a_malformed_packet_closes_the_connection(runtime, packet):
    closed = Counts(CLOSED)
    await provision(runtime, SERIAL)
    async with running_link(runtime) as link:
        raw, _ = await RawDevice.connect(link.port, SERIAL)
        raw.writer.write(packet + publish(STATE, b'{"after": true}'))
        await raw.writer.drain()
        assert await raw.closed_by_broker(within=5)
        assert closed.since("malformed_packet") == 1
        await asyncio.sleep(0.3)
        assert await stored_readings(runtime, SERIAL) == []


def nested(depth: int) -> bytes:
    """A JSON object nesting ``depth`` levels deep (the object itself is 1), in arrays."""
    return b'{"a":' + b"[" * (depth - 1) + b"]" * (depth - 1) + b"}"


async def test_deep_json_is_dropped_as_not_json_without_a_traceback(runtime, caplog):
    dropped = Counts(DROPPED)
    await provision(runtime, SERIAL)
    caplog.set_level(logging.WARNING, logger="devicecontrol")
    async with running_link(runtime) as link:
        raw, _ = await RawDevice.connect(link.port, SERIAL)
        for depth in (2000, MAX_PAYLOAD_DEPTH + 1, MAX_PAYLOAD_DEPTH):
            assert len(nested(depth)) <= 4096
            raw.writer.write(publish(STATE, nested(depth)))
        await raw.writer.drain()
        await eventually(lambda: stored_readings(runtime, SERIAL))
        assert len(await stored_readings(runtime, SERIAL)) == 1  # the 32-level one
        assert dropped.since("not_json") == 2
    assert not [r for r in caplog.records if r.exc_info], [r.getMessage() for r in caplog.records]
    assert "work fails" not in caplog.text


async def test_keys_beginning_with_an_underscore_are_removed_before_storing(runtime):
    await provision(runtime, SERIAL)
    async with running_link(runtime) as link:
        raw, _ = await RawDevice.connect(link.port, SERIAL)
        reading = {"temp": 21.5, "_links": {"self": {"href": "/evil"}}, "_embedded": {}}
        raw.writer.write(publish(STATE, msgspec.json.encode(reading)))
        await raw.writer.drain()
        stored = await eventually(lambda: stored_readings(runtime, SERIAL))
        assert stored == [{"temp": 21.5}]


async def test_failed_connects_elsewhere_never_keep_out_the_right_secret(runtime):
    await provision(runtime, SERIAL)
    limit = runtime.settings.throttle_device_per_serial.limit
    async with running_link(runtime) as link:
        for _ in range(limit + 2):  # an attacker at 127.0.0.2 who knows the serial
            _, code = await RawDevice.connect(
                link.port, SERIAL, "wrong-secret", from_address="127.0.0.2"
            )
            assert code == 5
        # the attacker's own address is throttled now, even with the right secret
        _, code = await RawDevice.connect(link.port, SERIAL, SECRET, from_address="127.0.0.2")
        assert code == 5
        # and the device, from its own address, is let in
        raw, code = await RawDevice.connect(link.port, SERIAL, SECRET, from_address="127.0.0.3")
        assert code == 0
        await eventually(lambda: is_online(runtime, SERIAL))
        raw.kill()


@pytest.mark.parametrize("asked", [0, 7], ids=["keep-alive 0", "above the maximum"])
async def test_keep_alive_0_or_above_the_maximum_gets_the_maximum(settings, asked):
    runtime = Runtime.from_settings(dataclasses.replace(settings, mqtt_max_keepalive_s=1))
    try:
        await provision(runtime, SERIAL)
        async with running_link(runtime) as link:
            raw, code = await RawDevice.connect(link.port, SERIAL, keep_alive=asked)
            assert code == 0
            await eventually(lambda: is_online(runtime, SERIAL))
            # silent for 1.5 times the maximum (2 s, rounded up): closed, and offline
            assert await raw.closed_by_broker(within=4)
            await eventually(lambda: is_offline(runtime, SERIAL), within=2.5)
    finally:
        await runtime.close()


def test_the_granted_keep_alive_is_the_asked_one_within_the_maximum():
    assert [granted_keep_alive(asked, 300) for asked in (0, 1, 60, 300, 301, 65535)] == [
        300, 1, 60, 300, 300, 300
    ]  # fmt: skip


async def test_sockets_that_never_connect_write_one_line_per_reason_and_window(
    runtime, caplog, monkeypatch
):
    closed = Counts(CLOSED)
    monkeypatch.setattr(broker_module, "CONNECT_TIMEOUT_S", 0.2)
    caplog.set_level(logging.INFO, logger="devicecontrol")
    caplog.set_level(logging.INFO, logger="amqtt")
    async with running_link(runtime) as link:
        idle = [await asyncio.open_connection("127.0.0.1", link.port) for _ in range(20)]
        for _, writer in idle[:10]:  # half send garbage, half wait out the deadline
            writer.write(b"GET / HTTP/1.1\r\n\r\n")
        for reader, _ in idle:
            async with asyncio.timeout(5):
                assert await reader.read() == b""
        assert closed.since("no_connect") == 20
    lines = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r.getMessage() for r in lines] == ["device_connection_closed"], [
        r.getMessage() for r in lines
    ]


def test_the_device_event_log_counts_what_it_holds_back(clock, caplog):
    caplog.set_level(logging.INFO, logger="devicecontrol")
    log = DeviceEventLog(window_s=10)
    for _ in range(5):
        log.note("device_connection_closed", "no_connect")
    log.note("device_connection_closed", "malformed_packet")
    clock.advance(10)
    log.note("device_connection_closed", "no_connect")
    written = [(r.fields["reason"], r.fields["count"]) for r in caplog.records]
    assert written == [("no_connect", 1), ("malformed_packet", 1), ("no_connect", 5)]
