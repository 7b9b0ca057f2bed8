"""Resuming a one-controller stream across ownership changes (contract §11), opened as a
lane opens it, on a real database: the replay reads the log's owner changes as they were
written by real hand-overs."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import func, select

from devicecontrol.clock import utcnow
from devicecontrol.controllers.service import reassign_controller
from devicecontrol.database.tables import controllers, events
from devicecontrol.events import log as events_log
from devicecontrol.events.opening import BearerCredential, _open, open_stream
from tests.devices.helpers import ANA, BOB
from tests.factories import make_controller, make_user

SERIAL = "PLUG-R"


async def newest(runtime) -> int:
    async with runtime.database.read() as connection:
        return int((await connection.execute(select(func.max(events.c.id)))).scalar_one() or 0)


async def online(runtime, is_online: bool) -> None:
    async with runtime.database.write() as connection:
        controller_id = (
            await connection.execute(
                select(controllers.c.id).where(controllers.c.serial_number == SERIAL)
            )
        ).scalar_one()
        await events_log.append(connection, [events_log.online(controller_id, SERIAL, is_online)])


async def replayed(runtime, user_id: int, after: int) -> list[str]:
    opened = await open_stream(
        runtime, user_id, BearerCredential("unused"), SERIAL, after,
        expires_at=utcnow() + timedelta(hours=1),
    )  # fmt: skip
    stream = opened.stream
    await _open(runtime, stream, opened.position, opened.state, opened.resume_after)
    assert stream.ended is None
    return [outgoing.event for outgoing in await stream.next_events(0)]


async def test_a_resume_across_a_hand_over_and_back_and_from_before_a_gain(runtime):
    ana = await make_user(runtime, ANA)
    bob = await make_user(runtime, BOB)
    await make_controller(runtime, SERIAL, owner=ANA)
    await online(runtime, True)
    anas_last = await newest(runtime)  # what Ana's stream saw last
    await reassign_controller(runtime, ana, SERIAL, new_owner=BOB)
    bobs_first = await newest(runtime)
    await online(runtime, False)  # Bob's time
    await reassign_controller(runtime, bob, SERIAL, new_owner=ANA)
    await online(runtime, True)
    # Ana's again: no end, nothing of Bob's time, a gap where it came back, then on; the
    # stream opens with the state as it is
    assert await replayed(runtime, ana, anas_last) == ["gap", "online", "online", "online"]
    # Bob, resuming from before he first had it, once it is his again: his first time from
    # his gain on, nothing of Ana's time between, a gap where it came back, then on
    await reassign_controller(runtime, ana, SERIAL, new_owner=BOB)
    assert await replayed(runtime, bob, bobs_first - 1) == [
        "online",
        "online",
        "gap",
        "online",
        "online",
    ]
