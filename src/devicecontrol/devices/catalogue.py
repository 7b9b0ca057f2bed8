"""The commands each device type takes, and their parameters (contract §10).

From the original API: what a type's command takes is checked here, once, for both the
original ``/provider/send`` and the native ``/controllers/{sn}/commands``. A type with no
catalogue takes any well-formed name with an object of parameters.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from devicecontrol.errors import FieldError, InvalidFields

COMMAND_NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")


@dataclass(frozen=True, slots=True)
class IntegerRange:
    low: int
    high: int

    def problem(self, value: Any) -> str | None:
        number = integral(value)
        if number is None:
            return "must be an integer"
        if not self.low <= number <= self.high:
            return f"must be {self.low} to {self.high}"
        return None

    def clean(self, value: Any) -> Any:
        return integral(value)


@dataclass(frozen=True, slots=True)
class OneOf:
    words: tuple[str, ...]

    def problem(self, value: Any) -> str | None:
        if value not in self.words:
            return "must be one of " + ", ".join(self.words)
        return None

    def clean(self, value: Any) -> Any:
        return value


Parameter = IntegerRange | OneOf

# the climate controller whose settings are its last send_ir_code (``command_log``)
MELISSA, SEND_IR_CODE = "melissa", "send_ir_code"

# command name -> its parameters (every one required)
CATALOGUE: dict[str, dict[str, dict[str, Parameter]]] = {
    MELISSA: {
        SEND_IR_CODE: {
            "state": IntegerRange(0, 2),  # 0 off, 1 on, 2 idle
            "mode": IntegerRange(0, 4),  # 0 auto, 1 fan, 2 heat, 3 cool, 4 dry
            "temp": IntegerRange(16, 30),
            "fan": IntegerRange(0, 3),  # 0 auto, 1 low, 2 medium, 3 high
        },
        "turn_led_off": {},
        "reset_color": {},
    },
    "smart_plug": {"switch_on_off": {"state": OneOf(("on", "off"))}},
    "bobbie": {
        "switch_on_off": {"state": OneOf(("on", "off"))},
        "default_state": {"state": IntegerRange(0, 2)},
        "led_on_off": {},
    },
    "vicki": {"set_keepalive_time": {"time": IntegerRange(1, 255)}},
}


def integral(value: Any) -> int | None:
    """An int, or a JSON number with an integral value (``22.0``, as Home Assistant sends)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def checked_params(
    device_type: str, name: str, fields: Mapping[str, Any], *, name_field: str, strict: bool
) -> dict[str, Any]:
    """The command's parameters, checked against the type's catalogue.

    ``strict=False`` (``/provider/send``) ignores fields the command does not take, because
    Home Assistant sends the whole ``command_log`` back with its change; the native endpoint
    refuses them. Raises InvalidFields naming every bad field.
    """
    commands = CATALOGUE.get(device_type)
    if commands is None:
        if not COMMAND_NAME.match(name):
            raise InvalidFields([FieldError(name_field, "must match [a-z][a-z0-9_]{0,63}")])
        return dict(fields)
    parameters = commands.get(name)
    if parameters is None:
        known = ", ".join(sorted(commands))
        raise InvalidFields([FieldError(name_field, f"a {device_type} takes {known}")])
    errors = [FieldError(field, "is required") for field in parameters if field not in fields]
    for field, rule in parameters.items():
        if field in fields and (problem := rule.problem(fields[field])):
            errors.append(FieldError(field, problem))
    if strict:
        errors += [
            FieldError(field, f"{name} takes no such parameter")
            for field in fields
            if field not in parameters
        ]
    if errors:
        raise InvalidFields(errors)
    return {field: rule.clean(fields[field]) for field, rule in parameters.items()}
