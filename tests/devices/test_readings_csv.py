"""GET /controllers/{sn}/readings as CSV (``Accept: text/csv`` or ``format=csv``): every
reading in range, oldest first, streamed in slices, with the ownership rules of the JSON."""

from __future__ import annotations

import csv
import io
from datetime import datetime

import pytest

from devicecontrol.devices.commands import service as commands
from devicecontrol.devices.readings import export
from devicecontrol.devices.readings.aggregates import Range
from tests.controllers.helpers import assert_problem
from tests.devices.helpers import ANA, BOB
from tests.devices.test_readings_summary import report_at
from tests.factories import logged_in_user, make_controller

READINGS = "/v1/controllers/MEL1/readings"
AS_CSV = {"Accept": "text/csv"}


def rows_of(response) -> list[list[str]]:
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "text/csv; charset=utf-8"
    return list(csv.reader(io.StringIO(response.text)))


async def test_csv_has_created_then_every_field_in_name_order_oldest_first(runtime, client):
    _, ana = await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, "MEL1", owner=ANA, type="melissa")
    await report_at(
        runtime,
        "MEL1",
        ("2026-11-20 10:00:00", {"temp": 21.5, "humidity": 40, "on": True}),
        ("2026-11-20 10:01:00", {"temp": -3, "mode": "cool, dry", "power": [1.5, 2]}),
        ("2026-11-20 10:02:00", {"note": '=HYPERLINK("x")', "extra": {"a": None}, "off": False}),
    )
    response = await client.get(READINGS, headers={**ana, **AS_CSV})
    assert response.headers["content-disposition"] == 'attachment; filename="MEL1-readings.csv"'
    assert response.headers["cache-control"] == "no-store"
    assert rows_of(response) == [
        ["created", "extra", "humidity", "mode", "note", "off", "on", "power", "temp"],
        ["2026-11-20 10:00:00", "", "40", "", "", "", "true", "", "21.5"],
        ["2026-11-20 10:01:00", "", "", "cool, dry", "", "", "", "[1.5,2]", "-3"],
        # a string a spreadsheet would run as a formula is written as text
        ["2026-11-20 10:02:00", '{"a":null}', "", "", '\'=HYPERLINK("x")', "false", "", "", ""],
    ]
    assert response.text.endswith("\r\n")


@pytest.mark.parametrize("backend", ["sqlite"])
async def test_format_csv_asks_the_same_and_format_json_or_no_accept_is_the_page(runtime, client):
    """SQLite alone: the choice of format is made before any query."""
    _, ana = await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, "MEL1", owner=ANA, type="melissa")
    await report_at(runtime, "MEL1", ("2026-11-20 10:00:00", {"temp": 1}))
    by_parameter = await client.get(READINGS + "?format=csv", headers=ana)
    by_accept = await client.get(READINGS, headers={**ana, **AS_CSV})
    assert (
        rows_of(by_parameter)
        == rows_of(by_accept)
        == [
            ["created", "temp"],
            ["2026-11-20 10:00:00", "1"],
        ]
    )
    for headers, params in (
        ({**ana, **AS_CSV}, {"format": "json"}),  # the parameter wins
        (ana, {}),
        ({**ana, "Accept": "application/json, text/csv;q=0.5"}, {}),
    ):
        page = await client.get(READINGS, params=params, headers=headers)
        assert page.headers["content-type"].startswith("application/hal+json"), headers
        assert page.json()["total"] == 1
    assert_problem(await client.get(READINGS + "?format=xml", headers=ana), 400, "format")


async def test_csv_keeps_within_since_and_until(runtime, client):
    _, ana = await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, "MEL1", owner=ANA, type="melissa")
    await report_at(
        runtime,
        "MEL1",
        ("2026-11-20 10:00:00", {"temp": 1}),
        ("2026-11-20 10:01:00", {"temp": 2, "humidity": 3}),
        ("2026-11-20 10:02:00", {"temp": 3, "late": 1}),
    )
    window = {"since": "2026-11-20 10:01:00", "until": "2026-11-20 10:02:00", "format": "csv"}
    rows = rows_of(await client.get(READINGS, params=window, headers=ana))
    assert rows == [["created", "humidity", "temp"], ["2026-11-20 10:01:00", "3", "2"]]
    empty = {**window, "until": window["since"]}
    assert rows_of(await client.get(READINGS, params=empty, headers=ana)) == [["created"]]
    bad = {**window, "since": "yesterday"}
    assert_problem(await client.get(READINGS, params=bad, headers=ana), 400, "since")


async def test_slices_follow_each_other_without_loss_or_repeat(runtime, client, monkeypatch):
    monkeypatch.setattr(export, "SLICE_ROWS", 3)
    _, ana = await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, "MEL1", owner=ANA, type="melissa")
    # several readings in one second: the slices continue after (created, id), not created
    same_second = [("2026-11-20 10:00:00", {"n": number}) for number in range(7)]
    await report_at(runtime, "MEL1", *same_second, ("2026-11-20 10:00:01", {"n": 7}))
    rows = rows_of(await client.get(READINGS, headers={**ana, **AS_CSV}))
    assert [row[1] for row in rows[1:]] == [str(number) for number in range(8)]


async def test_csv_of_someone_elses_controller_is_404_and_a_new_owner_sees_only_theirs(
    runtime, client
):
    _, ana = await logged_in_user(runtime, client, ANA)
    _, bob = await logged_in_user(runtime, client, BOB)
    await make_controller(runtime, "MEL1", owner=ANA, type="melissa")
    await report_at(runtime, "MEL1", ("2026-11-20 10:00:00", {"temp": 1, "secret": 5}))
    for bad in ("?format=xml", "?format=csv&since=bad", "?format=csv"):
        others = await client.get(READINGS + bad, headers=bob)
        assert_problem(others, 404)
    handed = await client.patch("/v1/controllers/MEL1/reassign", json={"owner": BOB},
                                headers=ana)  # fmt: skip
    assert handed.status_code == 200
    await report_at(runtime, "MEL1", ("2026-11-20 10:05:00", {"temp": 2}))
    rows = rows_of(await client.get(READINGS, headers={**bob, **AS_CSV}))
    assert rows == [["created", "temp"], ["2026-11-20 10:05:00", "2"]]


@pytest.mark.parametrize(
    ("value", "cell"),
    [
        ("+1", "'+1"),
        ("-x", "'-x"),
        ("@sum", "'@sum"),
        ("\tx", "'\tx"),
        ("plain", "plain"),
        (-1, "-1"),
        (1e21, "1e+21"),
        (None, ""),
        (True, "true"),
        ([1, "a"], '[1,"a"]'),
        ("with, comma", "with, comma"),
    ],
)
def test_a_cell_is_written_as_json_shows_it_and_never_as_a_formula(value, cell):
    written = io.StringIO()
    csv.writer(written, lineterminator="").writerow([export.cell(value)])
    assert next(csv.reader([written.getvalue()])) == [cell]


HOSTILE_NAMES = ['=HYPERLINK("http://x")', "+1+cmd|' /C calc'!A0", "-2+3", "@SUM(1)", "\tlead"]


async def test_a_devices_field_names_are_escaped_in_the_header_as_values_are(runtime, client):
    _, ana = await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, "MEL1", owner=ANA, type="melissa")
    await report_at(runtime, "MEL1", ("2026-11-20 10:00:00", dict.fromkeys(HOSTILE_NAMES, 1)))
    [header, row] = rows_of(await client.get(READINGS, headers={**ana, **AS_CSV}))
    assert header[0] == "created"
    assert sorted(header[1:]) == sorted("'" + name for name in HOSTILE_NAMES)
    assert row[1:] == ["1"] * len(HOSTILE_NAMES)


async def test_every_cell_but_a_number_is_quoted_so_no_separator_splits_it(runtime, client):
    """A spreadsheet that splits on ';' (or a tab, or '|') keeps a device's string whole."""
    _, ana = await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, "MEL1", owner=ANA, type="melissa")
    reading = {"note": "x;=1+1", "pipe": "a|b", "tab": "a\tb", "temp": 21.5, "n": -3}
    await report_at(runtime, "MEL1", ("2026-11-20 10:00:00", reading))
    response = await client.get(READINGS, headers={**ana, **AS_CSV})
    [header, row] = response.text.splitlines()
    assert header == '"created","n","note","pipe","tab","temp"'
    assert row == '"2026-11-20 10:00:00",-3,"x;\'=1+1","a|b","a\tb",21.5'
    for line in (header, row):
        for separator in (",", ";", "\t", "|"):  # however a spreadsheet cuts the line
            assert [piece for piece in line.split(separator) if runs(piece)] == []


def runs(piece: str) -> bool:
    """A piece of a line a spreadsheet would take for a formula (a number is a number)."""
    text = piece.lstrip('"')
    try:
        float(text)
    except ValueError:
        return text.startswith(export.FORMULA_STARTS)
    return False


async def test_a_formula_after_a_separator_inside_a_string_is_escaped_too(runtime, client):
    _, ana = await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, "MEL1", owner=ANA, type="melissa")
    hostile = {"a": "x;=1+1", "b": 'y|"@SUM(1)', "c": "z,-2+3", "d;=e": "\t=cmd", "f": "1;2"}
    await report_at(runtime, "MEL1", ("2026-11-20 10:00:00", hostile))
    response = await client.get(READINGS, headers={**ana, **AS_CSV})
    [header, row] = response.text.splitlines()
    for line in (header, row):
        for separator in (",", ";", "\t", "|"):
            assert [piece for piece in line.split(separator) if runs(piece)] == []
    [names, parsed] = list(csv.reader(io.StringIO(response.text)))
    assert names == ["created", "a", "b", "c", "d;'=e", "f"]
    assert parsed[1:] == ["x;'=1+1", "y|\"'@SUM(1)", "z,'-2+3", "'\t'=cmd", "1;2"]


async def test_a_slice_writes_a_bounded_number_of_cells_however_many_fields(
    runtime, client, monkeypatch
):
    """Readings with many fields come in more, smaller slices: no slice is written on the
    event loop in one piece larger than ``SLICE_CELLS`` cells."""
    monkeypatch.setattr(export, "SLICE_CELLS", 200)
    ana_id, _ = await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, "MEL1", owner=ANA, type="melissa")
    wide = {f"f{number:02}": number for number in range(39)}
    await report_at(runtime, "MEL1", *[(f"2026-11-20 10:00:{s:02}", wide) for s in range(12)])
    device = await commands.owned_device(runtime, ana_id, "MEL1")
    within = Range(device.controller_id, device.assignment_id, datetime(2026, 11, 20),
                   datetime(2026, 11, 21))  # fmt: skip
    chunks = [
        chunk
        async for chunk in export.csv_lines(
            runtime.database, within, dialect=runtime.database.dialect_name
        )
    ]
    rows_per_chunk = [len(list(csv.reader(io.StringIO(c.decode())))) for c in chunks[1:]]
    assert rows_per_chunk == [5, 5, 2]  # 40 cells a row, 200 a slice
    assert sum(rows_per_chunk) == 12
