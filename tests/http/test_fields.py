"""Bodies decoded into the Struct that documents them: every refused field named at once."""

from __future__ import annotations

from typing import Annotated

import msgspec
import pytest

from devicecontrol.errors import FieldError, InvalidFields
from devicecontrol.http.fields import (
    OptionalField,
    Refused,
    RequiredField,
    check_string_fields,
    decode_body,
)

REQUIRED = "must be a string of 1 to 1024 characters, without NUL"
OPTIONAL = "must be a string of at most 1024 characters, without NUL"


class Strict(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    name: RequiredField
    size: Annotated[int, msgspec.Meta(ge=1, le=9), Refused("must be 1 to 9")] = 1
    plain: int | None = None  # no Refused: msgspec's own words


class Lenient(msgspec.Struct, frozen=True):
    name: RequiredField
    hint: OptionalField = None


def refused(body: dict, struct: type[msgspec.Struct]) -> list[FieldError]:
    with pytest.raises(InvalidFields) as caught:
        decode_body(body, struct)
    return caught.value.errors or []


def test_a_good_body_is_the_struct():
    assert decode_body({"name": "a", "size": 9}, Strict) == Strict(name="a", size=9)
    assert decode_body({"name": "a", "grant_type": "password"}, Lenient) == Lenient(name="a")


def test_every_refused_field_is_named_in_the_struct_s_order():
    body = {"size": 10, "extra": 1, "plain": "x", "y" * 100: 0}
    assert refused(body, Strict) == [
        FieldError("extra", "is not a field of this request"),
        FieldError("y" * 64, "is not a field of this request"),
        FieldError("name", "is required"),
        FieldError("size", "must be 1 to 9"),
        FieldError("plain", "Expected `int | null`, got `str`"),
    ]


@pytest.mark.parametrize(
    ("value", "message"),
    [(None, "is required"), ("", REQUIRED), (7, REQUIRED), ("x" * 1025, REQUIRED),
     ("a\x00b", REQUIRED)],
)  # fmt: skip
def test_a_required_string(value, message):
    assert refused({"name": value}, Lenient) == [FieldError("name", message)]


def test_an_optional_string_may_be_absent_null_or_empty_but_not_long():
    for hint in (None, "", "x" * 1024):
        assert decode_body({"name": "a", "hint": hint}, Lenient).hint == hint
    assert refused({"name": "a", "hint": "x" * 1025}, Lenient) == [FieldError("hint", OPTIONAL)]


def test_string_fields_checked_one_by_one_follow_the_same_types():
    check_string_fields({"a": "x", "b": ""}, ("a",), ("b",))
    with pytest.raises(InvalidFields) as caught:
        check_string_fields({"b": 5}, ("a",), ("b",))
    assert caught.value.errors == [FieldError("a", "is required"), FieldError("b", OPTIONAL)]
