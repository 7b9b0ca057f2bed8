"""What an external broker keeps while a link process is dead is stored whole when it is
back (contract §9; docs/DEVICES.md, "nothing acknowledged is lost"): on Mosquitto and
RabbitMQ, one link process and two shards (the embedded endpoint keeps nothing: while it is
down no device is connected). On the code before issue 36 every variant failed here: the
rate was judged as the link took the backlog, and each device's readings past one burst
were counted ``rate_limited`` after the broker had acknowledged them.
"""

from __future__ import annotations

import asyncio

import pytest

from tests.devices.link.behaviour.conftest import KEPT
from tests.devices.link.behaviour.fleets import (
    RATE_PER_S,
    Fleet,
    all_stored,
    send,
    stored,
)
from tests.devices.link.support import eventually

pytestmark = pytest.mark.parametrize("fleet", KEPT, indirect=True, scope="module")
WAIT_S = 15.0


BACKLOG_DEVICES = ("BEH-BL-1", "BEH-BL-2", "BEH-BL-3")
SENDS_PER_S = 3  # each device, within its rate of RATE_PER_S
DOWN_S = 4.0  # the link is dead this long, then takes seconds to start


async def test_a_backlog_kept_while_a_link_was_killed_is_stored_whole(fleet: Fleet) -> None:
    """Devices within their rate report while the last link process is SIGKILLed and
    started again: every reading the broker acknowledged is stored, once."""
    fleet.provision(*BACKLOG_DEVICES)
    sent: dict[str, int] = dict.fromkeys(BACKLOG_DEVICES, 0)
    stop = asyncio.Event()

    async def report(serial: str) -> None:
        async with fleet.device(serial) as plug:
            while not stop.is_set():
                await send(plug, serial, sent[serial])
                sent[serial] += 1  # acknowledged by the broker
                await asyncio.sleep(1 / SENDS_PER_S)

    reporters = [asyncio.create_task(report(serial)) for serial in BACKLOG_DEVICES]
    try:
        await asyncio.sleep(1.0)
        victim = fleet.shards - 1
        fleet.kill(victim)
        await asyncio.sleep(DOWN_S)
        fleet.start(victim)
        await asyncio.sleep(1.0)
    finally:
        stop.set()
        await asyncio.gather(*reporters)
    for serial in BACKLOG_DEVICES:
        # more than a burst waited for the dead link, even half of it (Mosquitto's shares)
        assert sent[serial] > SENDS_PER_S * DOWN_S > 2 * RATE_PER_S
        await eventually(
            lambda serial=serial: all_stored(fleet, serial, sent[serial]), within=WAIT_S,
            what=f"{serial}'s {sent[serial]} readings stored\n{fleet.logs()}",
        )  # fmt: skip
        seqs = sorted(reading["seq"] for reading in await stored(fleet, serial))
        assert seqs == list(range(sent[serial])), seqs  # each once
