"""When a schedule fires (contract §12): weekdays Monday first, the schedule's time zone,
daylight-saving gaps and repeats (zoneinfo only)."""

from __future__ import annotations

from datetime import UTC, date, datetime, time

from devicecontrol.automations.schedules.timing import (
    END,
    START,
    Timetable,
    instant_of,
    next_firing,
    parse_time,
    zone,
)

BERLIN = zone("Europe/Berlin")


def at(*moment: int) -> datetime:
    return datetime(*moment, tzinfo=UTC)


def table(days: str = "1111111", start: str = "07:00", end: str | None = None, where=BERLIN):
    return Timetable(days, parse_time(start), end and parse_time(end), where, end is not None)


def test_days_are_monday_first():
    tuesdays = table("0100000", where=zone("UTC"))
    # Monday 2026-11-23 noon: the next firing is Tuesday 07:00
    assert next_firing(tuesdays, at(2026, 11, 23, 12)) == (at(2026, 11, 24, 7), START)
    assert next_firing(table("0000000"), at(2026, 11, 23)) is None


def test_the_wall_clock_time_is_the_schedules_zones():
    sofia = table(where=zone("Europe/Sofia"))  # UTC+2 in winter
    assert next_firing(sofia, at(2026, 11, 23, 12)) == (at(2026, 11, 24, 5), START)


def test_a_time_in_the_spring_gap_fires_at_the_first_minute_after_it():
    # Europe/Berlin, Sunday 29 March 2026: 02:00 CET jumps to 03:00 CEST
    assert instant_of(date(2026, 3, 29), time(2, 30), BERLIN) == at(2026, 3, 29, 1, 0)
    assert instant_of(date(2026, 3, 29), time(2, 0), BERLIN) == at(2026, 3, 29, 1, 0)
    assert instant_of(date(2026, 3, 29), time(1, 59), BERLIN) == at(2026, 3, 29, 0, 59)
    night = table(start="02:30")
    assert next_firing(night, at(2026, 3, 28, 22)) == (at(2026, 3, 29, 1, 0), START)
    assert next_firing(night, at(2026, 3, 29, 1, 0)) == (at(2026, 3, 30, 0, 30), START)


def test_a_time_that_happens_twice_fires_once_at_its_first_occurrence():
    # Europe/Berlin, Sunday 25 October 2026: 03:00 CEST falls back to 02:00 CET
    night = table(start="02:30")
    first = next_firing(night, at(2026, 10, 24, 22))
    assert first == (at(2026, 10, 25, 0, 30), START)  # 02:30 CEST
    # not again at 02:30 CET (01:30 UTC): the next is Monday's
    assert next_firing(night, first[0], START) == (at(2026, 10, 26, 1, 30), START)


def test_the_end_fires_at_to_time_the_next_day_when_it_is_not_after_from_time():
    overnight = table("0000001", start="22:00", end="06:00", where=zone("UTC"))
    sunday_night = (at(2026, 11, 29, 22), START)  # Sunday
    assert next_firing(overnight, at(2026, 11, 29, 12)) == sunday_night
    assert next_firing(overnight, sunday_night[0], START) == (at(2026, 11, 30, 6), END)


def test_a_start_and_an_end_at_one_instant_both_fire_start_first():
    # 02:30 does not exist that night and becomes 03:00, the end's own time
    gap = table(start="02:30", end="03:00")
    start = next_firing(gap, at(2026, 3, 28, 22))
    assert start == (at(2026, 3, 29, 1), START)
    assert next_firing(gap, start[0], START) == (at(2026, 3, 29, 1), END)
    assert next_firing(gap, start[0], END)[0] > start[0]


def test_zone_names_are_iana_ones():
    assert zone("America/Argentina/Buenos_Aires") is not None
    bad_names = ("", "Mars/Olympus", "../../etc/passwd", "Europe/Berlin\x00", "x" * 65, "/UTC",
                 "Europe", "zone.tab", "right/UTC", "posix/Europe/Berlin", "localtime")  # fmt: skip
    for bad in bad_names:
        assert zone(bad) is None, bad
