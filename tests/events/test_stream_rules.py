"""A stream's own rules, in-process (events/stream.py): what it takes of the log's events
in order, and its bound. The streams over real sockets are in test_streams.py."""

from __future__ import annotations

from types import SimpleNamespace

import msgspec

from devicecontrol.events import log
from devicecontrol.events.stream import MAX_WAITING, Ended, Stream

ANA, BOB = 1, 2


def logged(position: int, event: log.NewEvent) -> SimpleNamespace:
    """``event`` as the log holds it at ``position``."""
    return SimpleNamespace(
        id=position,
        controller_id=event.controller_id,
        kind=event.kind.value,
        user_id=event.user_id,
        data=event.data,
    )


def sent(stream: Stream) -> list[tuple[int, str, dict]]:
    return [(o.id, o.event, msgspec.json.decode(o.data)) for o in stream._waiting]


def test_a_slow_reader_is_closed_past_the_bound_and_what_waited_is_dropped():
    stream = Stream(ANA, {7}, one_controller=True)
    for position in range(1, MAX_WAITING + 1):
        stream.offer(logged(position, log.online(7, "PLUG-7", position % 2 == 0)))
    assert stream.waiting == MAX_WAITING and stream.ended is None
    stream.offer(logged(MAX_WAITING + 1, log.online(7, "PLUG-7", True)))
    assert stream.ended == Ended.SLOW_READER
    assert stream.waiting == 0  # memory back at once; the client resumes from its last id
    stream.offer(logged(MAX_WAITING + 2, log.online(7, "PLUG-7", False)))
    assert stream.waiting == 0


def test_only_the_users_controllers_while_they_own_them():
    stream = Stream(ANA, {7}, one_controller=False)
    stream.offer(logged(1, log.online(8, "PLUG-8", True)))  # not hers
    stream.offer(logged(2, log.gained(8, "PLUG-8", BOB, True)))  # bob's gain
    stream.offer(logged(3, log.gained(9, "PLUG-9", ANA, False)))  # hers now
    stream.offer(logged(4, log.online(9, "PLUG-9", True)))
    stream.offer(logged(5, log.lost(7, "PLUG-7", ANA, "owner changed")))
    stream.offer(logged(6, log.online(7, "PLUG-7", False)))  # no longer hers
    stream.offer(logged(7, log.online(9, "PLUG-9", False)))
    assert sent(stream) == [
        (3, "online", {"serial_number": "PLUG-9", "online": False}),
        (4, "online", {"serial_number": "PLUG-9", "online": True}),
        (5, "end", {"serial_number": "PLUG-7", "reason": "owner changed"}),
        (7, "online", {"serial_number": "PLUG-9", "online": False}),
    ]
    assert stream.ended is None  # the all-controllers stream goes on


def test_the_one_controller_stream_ends_with_its_controller_and_skips_what_it_opened_with():
    stream = Stream(ANA, {7}, one_controller=True)
    stream.skip_upto = 2
    stream.offer(logged(2, log.online(7, "PLUG-7", True)))  # in its opening state already
    stream.offer(logged(3, log.gained(9, "PLUG-9", ANA, True)))  # another of hers: not here
    stream.offer(logged(4, log.lost(7, "PLUG-7", ANA, "released")))
    assert [(i, e) for i, e, _ in sent(stream)] == [(4, "end")]
    assert stream.ended == Ended.CONTROLLER_LOST


def test_a_one_controller_replay_across_a_loss_and_return_hides_the_others_time_with_a_gap():
    """Resumed from before the controller went to Bob and came back: no ``end`` (it is
    Ana's again), nothing of Bob's time, a ``gap`` where it came back, and on."""
    stream = Stream(ANA, {7}, one_controller=True)
    stream.replaying_for = 7
    stream.offer(logged(1, log.online(7, "PLUG-7", True)))
    stream.offer(logged(2, log.lost(7, "PLUG-7", ANA, "owner changed")))
    stream.offer(logged(3, log.gained(7, "PLUG-7", BOB, True)))
    stream.offer(logged(4, log.online(7, "PLUG-7", False)))  # Bob's time: not hers
    stream.offer(logged(5, log.lost(7, "PLUG-7", BOB, "owner changed")))
    stream.offer(logged(6, log.gained(7, "PLUG-7", ANA, False)))
    stream.offer(logged(7, log.online(7, "PLUG-7", True)))
    assert sent(stream) == [
        (1, "online", {"serial_number": "PLUG-7", "online": True}),
        (6, "gap", {"serial_number": None}),
        (6, "online", {"serial_number": "PLUG-7", "online": False}),
        (7, "online", {"serial_number": "PLUG-7", "online": True}),
    ]
    assert stream.ended is None


def test_a_one_controller_replay_from_before_the_gain_starts_with_the_gain():
    """Resumed from before Ana had the controller: its events from her gain on, starting
    with the gain's ``online``; nothing of before."""
    stream = Stream(ANA, set(), one_controller=True)
    stream.replaying_for = 7
    stream.offer(logged(1, log.online(7, "PLUG-7", True)))  # not hers yet
    stream.offer(logged(2, log.gained(9, "PLUG-9", ANA, True)))  # another of hers: not here
    stream.offer(logged(3, log.gained(7, "PLUG-7", ANA, True)))
    stream.offer(logged(4, log.online(7, "PLUG-7", False)))
    assert sent(stream) == [
        (3, "online", {"serial_number": "PLUG-7", "online": True}),
        (4, "online", {"serial_number": "PLUG-7", "online": False}),
    ]
    assert stream.ended is None
