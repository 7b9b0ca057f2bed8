"""The link's ingest (contract §9, Readings): a QoS 1 message is acknowledged once stored,
a redelivery (DUP) of a stored reading is not stored twice, and writes are batched."""

from __future__ import annotations

import asyncio

from amqtt.mqtt.publish import PublishPacket

from tests.devices.link.support import (
    RawDevice,
    eventually,
    provision,
    running_link,
    stored_readings,
)

SERIAL = "PLUG-DUP"
STATE = f"devices/{SERIAL}/state"
PUBACK = bytes([0x40, 0x02])


def publish(payload: bytes, packet_id: int, *, dup: bool) -> bytes:
    return PublishPacket.build(STATE, payload, packet_id, dup, 1, False).to_bytes()


async def acknowledged(raw: RawDevice, packet_id: int) -> None:
    async with asyncio.timeout(5):
        assert await raw.reader.readexactly(4) == PUBACK + packet_id.to_bytes(2, "big")


async def test_a_dup_redelivery_of_a_stored_reading_is_acknowledged_and_not_stored_again(
    runtime,
):
    await provision(runtime, SERIAL)
    async with running_link(runtime) as link:
        raw, _ = await RawDevice.connect(link.port, SERIAL)
        raw.writer.write(publish(b'{"temp": 21.5}', 7, dup=False))
        await acknowledged(raw, 7)
        # the device did not see that PUBACK (a crash, a lost connection): it sends again
        raw.writer.write(publish(b'{"temp": 21.5}', 7, dup=True))
        await acknowledged(raw, 7)
        raw.writer.write(publish(b'{"temp": 22.0}', 8, dup=False))
        await acknowledged(raw, 8)
        assert await stored_readings(runtime, SERIAL) == [{"temp": 21.5}, {"temp": 22.0}]


async def test_the_same_values_sent_again_without_dup_are_a_new_reading(runtime):
    await provision(runtime, SERIAL)
    async with running_link(runtime) as link:
        raw, _ = await RawDevice.connect(link.port, SERIAL)
        for packet_id in (1, 2):
            raw.writer.write(publish(b'{"temp": 21.5}', packet_id, dup=False))
            await acknowledged(raw, packet_id)
        assert await stored_readings(runtime, SERIAL) == [{"temp": 21.5}] * 2


async def test_a_dup_whose_first_copy_never_arrived_is_stored(runtime):
    await provision(runtime, SERIAL)
    async with running_link(runtime) as link:
        raw, _ = await RawDevice.connect(link.port, SERIAL)
        raw.writer.write(publish(b'{"temp": 19.0}', 3, dup=True))
        await acknowledged(raw, 3)
        await eventually(lambda: stored_readings(runtime, SERIAL))
        assert await stored_readings(runtime, SERIAL) == [{"temp": 19.0}]
