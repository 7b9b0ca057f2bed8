"""The two line formats, JSON and text, and DEVICECONTROL_LOG_FORMAT: one line per record."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import re
import sys

import pytest

from devicecontrol.config import SettingsError, load_settings
from devicecontrol.observability.logs import (
    REQUEST_ID,
    JsonFormatter,
    LoopBatchedStreamHandler,
    TextFormatter,
)

TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")
HOSTILE = 'x\n{"event":"login","outcome":"success"} "quoted" \x1b[31m'


def structured(**fields: object) -> logging.LogRecord:
    record = logging.LogRecord("devicecontrol.access", logging.INFO, "", 0, "request", (), None)
    record.fields = {"event": "request", **fields}
    return record


def plain(message: str, *args: object, exc_info: object = None) -> logging.LogRecord:
    return logging.LogRecord(
        "devicecontrol.errors", logging.WARNING, "", 0, message, args, exc_info
    )


def test_json_puts_the_fields_after_time_level_and_logger():
    line = JsonFormatter().format(structured(status=200, user_id=None, route="/v1/users/me"))
    parsed = json.loads(line)
    assert TIMESTAMP.fullmatch(parsed.pop("ts"))
    assert parsed == {
        "level": "info",
        "logger": "devicecontrol.access",
        "event": "request",
        "status": 200,
        "user_id": None,
        "route": "/v1/users/me",
    }


def test_json_renders_other_records_with_their_message_and_the_request_id():
    token = REQUEST_ID.set("req-1")
    try:
        line = JsonFormatter().format(plain("database unavailable: %s", "OperationalError"))
    finally:
        REQUEST_ID.reset(token)
    parsed = json.loads(line)
    assert parsed["message"] == "database unavailable: OperationalError"
    assert (parsed["level"], parsed["request_id"]) == ("warning", "req-1")


def test_json_keeps_a_traceback_on_its_one_line():
    try:
        raise ValueError("boom")
    except ValueError:
        record = plain("unhandled error", exc_info=sys.exc_info())
    line = JsonFormatter().format(record)
    assert "\n" not in line
    assert "ValueError: boom" in json.loads(line)["exception"]


def test_json_escapes_hostile_values_so_they_stay_inside_one_field():
    line = JsonFormatter().format(structured(client=HOSTILE))
    assert "\n" not in line and "\x1b" not in line
    assert json.loads(line)["client"] == HOSTILE


def test_text_is_time_level_event_then_key_value_pairs_without_empty_ones():
    record = structured(
        request_id="abc",
        route="/v1/controllers/{serial_number}",
        status=404,
        duration_ms=1.25,
        user_id=None,
    )
    line = TextFormatter().format(record)
    timestamp, rest = line.split(" ", 1)
    assert TIMESTAMP.fullmatch(timestamp)
    assert rest == (
        "INFO request request_id=abc route=/v1/controllers/{serial_number} status=404 "
        "duration_ms=1.25"
    )


def test_text_quotes_and_escapes_any_value_that_is_not_a_plain_word():
    line = TextFormatter().format(structured(client=HOSTILE))
    assert "\n" not in line and "\x1b" not in line
    assert line.endswith("client=" + json.dumps(HOSTILE))


def test_text_renders_other_records_with_their_logger_and_message():
    line = TextFormatter().format(plain("database unavailable: %s", "OperationalError"))
    expected = "WARNING devicecontrol.errors database unavailable: OperationalError"
    assert line.split(" ", 1)[1] == expected


def test_log_format_defaults_to_json_and_takes_text_in_any_case():
    assert load_settings({}).log_format == "json"
    assert load_settings({"DEVICECONTROL_LOG_FORMAT": " TEXT "}).log_format == "text"
    assert load_settings({"DEVICECONTROL_LOG_FORMAT": ""}).log_format == "json"


@pytest.mark.parametrize("raw", ["xml", "jsonl", "1"])
def test_log_format_rejects_anything_else_naming_the_variable(raw):
    with pytest.raises(SettingsError, match="DEVICECONTROL_LOG_FORMAT"):
        load_settings({"DEVICECONTROL_LOG_FORMAT": raw})


async def test_lines_of_one_loop_turn_are_written_together_in_order_right_after_it():
    stream = io.StringIO()
    handler = LoopBatchedStreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    for number in range(3):
        handler.handle(structured(number=number))
    assert stream.getvalue() == ""  # still this turn of the loop
    await asyncio.sleep(0)
    assert [json.loads(line)["number"] for line in stream.getvalue().splitlines()] == [0, 1, 2]


def test_outside_an_event_loop_a_line_is_written_at_once():
    stream = io.StringIO()
    handler = LoopBatchedStreamHandler(stream)
    handler.setFormatter(TextFormatter())
    handler.handle(structured(status=200))
    assert stream.getvalue().endswith(" INFO request status=200\n")
