"""The original API's command catalogue per type (contract §10)."""

from __future__ import annotations

import pytest

from devicecontrol.devices.catalogue import checked_params
from devicecontrol.errors import InvalidFields

GOOD_IR = {"state": 1, "mode": 3, "temp": 22, "fan": 2}


def fields_of(exc: pytest.ExceptionInfo[InvalidFields]) -> list[str]:
    return [error.field for error in exc.value.errors or []]


def test_send_ir_code_takes_all_four_settings_in_range():
    assert checked_params("melissa", "send_ir_code", GOOD_IR, name_field="c", strict=True) == (
        GOOD_IR
    )


@pytest.mark.parametrize(
    ("field", "value"),
    [("state", 3), ("mode", 5), ("temp", 15), ("temp", 31), ("fan", 4), ("fan", -1)],
)
def test_send_ir_code_values_out_of_range_are_named(field, value):
    with pytest.raises(InvalidFields) as refused:
        checked_params(
            "melissa", "send_ir_code", {**GOOD_IR, field: value}, name_field="c", strict=True
        )
    assert fields_of(refused) == [field]


def test_integral_floats_count_as_integers_and_are_stored_as_integers():
    sent = {"state": 1.0, "mode": 2.0, "temp": 22.0, "fan": 0.0}
    params = checked_params("melissa", "send_ir_code", sent, name_field="c", strict=True)
    assert params == {"state": 1, "mode": 2, "temp": 22, "fan": 0}
    assert all(type(value) is int for value in params.values())


@pytest.mark.parametrize("value", [22.5, "22", True, None, [22]])
def test_a_non_integral_temperature_is_refused(value):
    with pytest.raises(InvalidFields) as refused:
        checked_params(
            "melissa", "send_ir_code", {**GOOD_IR, "temp": value}, name_field="c", strict=True
        )
    assert fields_of(refused) == ["temp"]


def test_missing_fields_are_each_named():
    with pytest.raises(InvalidFields) as refused:
        checked_params("melissa", "send_ir_code", {"state": 1}, name_field="c", strict=True)
    assert sorted(fields_of(refused)) == ["fan", "mode", "temp"]


def test_extra_fields_are_ignored_leniently_and_refused_strictly():
    extra = {**GOOD_IR, "serial_number": "X", "humidity": 40}
    assert checked_params("melissa", "send_ir_code", extra, name_field="c", strict=False) == (
        GOOD_IR
    )
    with pytest.raises(InvalidFields) as refused:
        checked_params("melissa", "send_ir_code", extra, name_field="c", strict=True)
    assert sorted(fields_of(refused)) == ["humidity", "serial_number"]


@pytest.mark.parametrize(
    ("device_type", "name", "fields"),
    [
        ("melissa", "turn_led_off", {}),
        ("melissa", "reset_color", {}),
        ("smart_plug", "switch_on_off", {"state": "on"}),
        ("bobbie", "switch_on_off", {"state": "off"}),
        ("bobbie", "default_state", {"state": 2}),
        ("bobbie", "led_on_off", {}),
        ("vicki", "set_keepalive_time", {"time": 255}),
    ],
)
def test_every_catalogued_command_is_accepted(device_type, name, fields):
    assert checked_params(device_type, name, fields, name_field="c", strict=True) == fields


@pytest.mark.parametrize(
    ("device_type", "name", "fields", "bad"),
    [
        ("smart_plug", "switch_on_off", {"state": "ON"}, "state"),
        ("smart_plug", "send_ir_code", GOOD_IR, "command"),
        ("bobbie", "default_state", {"state": 3}, "state"),
        ("vicki", "set_keepalive_time", {"time": 0}, "time"),
        ("vicki", "set_keepalive_time", {"time": 256}, "time"),
    ],
)
def test_outside_the_catalogue_is_refused(device_type, name, fields, bad):
    with pytest.raises(InvalidFields) as refused:
        checked_params(device_type, name, fields, name_field="command", strict=True)
    assert fields_of(refused) == [bad]


def test_a_type_without_a_catalogue_takes_any_well_formed_name_and_params():
    params = {"anything": [1, 2], "nested": {"a": 1}}
    assert checked_params("thermo9", "set_x_2", params, name_field="name", strict=True) == params
    for bad_name in ("Set", "9x", "", "a" * 65, "a-b"):
        with pytest.raises(InvalidFields) as refused:
            checked_params("thermo9", bad_name, {}, name_field="name", strict=True)
        assert fields_of(refused) == ["name"]
