"""Body fields: the msgspec Struct that documents a body (``openapi.with_body``) also
decodes it, so a field's type and constraints are its one rule.

``Refused`` gives the API's words for what a field's type refuses; ``RequiredField`` and
``OptionalField`` are the strings most bodies take. Bodies whose fields are checked one by
one (a serial number that decides a 404 first, say) use ``check_string_fields``, which
applies those same two types.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, TypeVar, get_args

import msgspec

from devicecontrol.errors import FieldError, InvalidFields

MAX_FIELD_LENGTH = 1024
MAX_NAME_SHOWN = 64  # of an unknown member name
# ECMA-262 and Python agree on this one: any characters but NUL
NO_NUL = "^[^\x00]*$"
S = TypeVar("S", bound=msgspec.Struct)


@dataclass(frozen=True, slots=True)
class Refused:
    """The API's words for a value a field's type refuses, written beside the type
    (``Annotated[..., Refused("must be ...")]``); msgspec and the OpenAPI document ignore it."""

    message: str


RequiredField = Annotated[
    str,
    msgspec.Meta(min_length=1, max_length=MAX_FIELD_LENGTH, pattern=NO_NUL),
    Refused(f"must be a string of 1 to {MAX_FIELD_LENGTH} characters, without NUL"),
]
OptionalField = Annotated[
    Annotated[str, msgspec.Meta(max_length=MAX_FIELD_LENGTH, pattern=NO_NUL)] | None,
    Refused(f"must be a string of at most {MAX_FIELD_LENGTH} characters, without NUL"),
]


def decode_body(body: dict[str, Any], struct: type[S]) -> S:
    """``body`` as ``struct``, converted by msgspec: the Struct's types and constraints are
    the rules, as documented. Otherwise a 400 naming every refused field."""
    try:
        return msgspec.convert(body, struct)
    except msgspec.ValidationError as refused:
        errors = field_errors(body, struct) or [FieldError("", str(refused))]
        raise InvalidFields(errors) from None


def field_errors(body: dict[str, Any], struct: type[msgspec.Struct]) -> list[FieldError]:
    """What msgspec refuses in ``body``, field by field: unknown fields (when the Struct
    forbids them), then each of its fields in order."""
    fields = msgspec.structs.fields(struct)
    errors = []
    if struct.__struct_config__.forbid_unknown_fields:
        known = {field.encode_name for field in fields}
        errors += [
            FieldError(name[:MAX_NAME_SHOWN], "is not a field of this request")
            for name in body
            if name not in known
        ]
    for field in fields:
        problem = _problem(body, field.encode_name, field.type, required=field.required)
        if problem is not None:
            errors.append(FieldError(field.encode_name, problem))
    return errors


def field_value(body: dict[str, Any], name: str, annotation: Any, errors: list[FieldError]) -> Any:
    """``body[name]`` as ``annotation`` (a required field), converted by msgspec, for bodies
    checked field by field; when refused, its problem goes to ``errors`` and it is None."""
    problem = _problem(body, name, annotation, required=True)
    if problem is not None:
        errors.append(FieldError(name, problem))
        return None
    return msgspec.convert(body[name], annotation)


def check_string_fields(
    body: dict[str, Any], required: tuple[str, ...], optional: tuple[str, ...] = ()
) -> None:
    """The named fields as ``RequiredField`` / ``OptionalField``: a 400 naming every bad one,
    or nothing when all are acceptable."""
    errors = [
        FieldError(name, problem)
        for names, annotation, is_required in (
            (required, RequiredField, True),
            (optional, OptionalField, False),
        )
        for name in names
        if (problem := _problem(body, name, annotation, required=is_required)) is not None
    ]
    if errors:
        raise InvalidFields(errors)


def _problem(body: dict[str, Any], name: str, annotation: Any, *, required: bool) -> str | None:
    """Why msgspec refuses ``body[name]`` as ``annotation``; None when it takes it. Absent,
    or null where a value is required: "is required"."""
    if name not in body:
        return "is required" if required else None
    value = body[name]
    try:
        msgspec.convert(value, annotation)
    except msgspec.ValidationError as refused:
        if value is None and required:
            return "is required"
        return _refusal(annotation) or str(refused)
    return None


def _refusal(annotation: Any) -> str | None:
    """The message of the first ``Refused`` in ``annotation``, its union's members included."""
    for part in get_args(annotation):
        message = part.message if isinstance(part, Refused) else _refusal(part)
        if message is not None:
            return message
    return None
