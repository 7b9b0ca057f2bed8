"""The commands a controller's type accepts (devices/catalogue.py), as the forms of its
page: an integer range as a number field or, where the words name each value, a choice;
a plug's on/off as two buttons. What is sent is checked by the catalogue, as the API's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from devicecontrol.devices.catalogue import CATALOGUE, IntegerRange, OneOf
from devicecontrol.webapp.wording import words_or

SWITCH = ("on", "off")


@dataclass(frozen=True, slots=True)
class Choice:
    value: str
    label: str


@dataclass(frozen=True, slots=True)
class ControlField:
    name: str
    label: str
    low: int | None  # a number field's range; None for a choice
    high: int | None
    choices: tuple[Choice, ...]
    current: str | None  # the value to show first (a melissa's current settings)


@dataclass(frozen=True, slots=True)
class CommandControl:
    name: str
    label: str
    fields: tuple[ControlField, ...]
    switch: bool  # one on/off parameter: two buttons instead of a form


def _field(
    device_type: str, command: str, name: str, rule: IntegerRange | OneOf, current: Any
) -> ControlField:
    label = words_or(f"field.{name}", name)
    shown = None if current is None else str(current)
    if isinstance(rule, OneOf):
        choices = tuple(Choice(word, words_or(f"choice.{word}", word)) for word in rule.words)
        return ControlField(name, label, None, None, choices, shown)
    keys = [f"choice.{device_type}.{command}.{name}.{v}" for v in range(rule.low, rule.high + 1)]
    if all(words_or(key, "") for key in keys):
        values = range(rule.low, rule.high + 1)
        pairs = zip(values, keys, strict=True)
        choices = tuple(Choice(str(v), words_or(k, str(v))) for v, k in pairs)
        return ControlField(name, label, None, None, choices, shown)
    return ControlField(name, label, rule.low, rule.high, (), shown)


def command_controls(
    device_type: str, current: dict[str, Any] | None = None
) -> list[CommandControl]:
    """The type's commands in the catalogue's order; none for a type it does not list."""
    controls = []
    for command, parameters in CATALOGUE.get(device_type, {}).items():
        settings = current or {}
        fields = tuple(
            _field(device_type, command, name, rule, settings.get(name))
            for name, rule in parameters.items()
        )
        switch = len(parameters) == 1 and any(
            isinstance(rule, OneOf) and rule.words == SWITCH for rule in parameters.values()
        )
        controls.append(
            CommandControl(command, words_or(f"command.{command}", command), fields, switch)
        )
    return controls


def sent_fields(device_type: str, command: str, form: dict[str, str]) -> dict[str, Any]:
    """A form's values as the API's JSON would carry them: the catalogue's integers as
    numbers (anything else is left as sent, for the catalogue to refuse in words)."""
    parameters = CATALOGUE.get(device_type, {}).get(command, {})
    fields: dict[str, Any] = {}
    for name, value in form.items():
        rule = parameters.get(name)
        text = value.strip()
        is_number = text.lstrip("-").isdigit() and len(text) < 10
        fields[name] = int(text) if isinstance(rule, IntegerRange) and is_number else text
    return fields
