"""Reading request bodies: JSON objects everywhere, form bodies on the token endpoints too."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, TypeVar, get_args
from urllib.parse import parse_qsl

import msgspec
from litestar import Request

from devicecontrol.errors import BadRequest, FieldError, InvalidFields, UnsupportedMediaType

JSON = "application/json"
FORM = "application/x-www-form-urlencoded"
MAX_FIELD_LENGTH = 1024
MAX_NAME_SHOWN = 64  # of a repeated or unknown member name, in the error detail
S = TypeVar("S", bound=msgspec.Struct)


def media_type(content_types: list[str]) -> str:
    """The media type of a request's Content-Type values, lower-case; "" when absent, and
    when sent twice (which one is meant?)."""
    if len(content_types) != 1:
        return ""
    return content_types[0].split(";", 1)[0].strip().lower()


def _no_duplicate_members(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    members: dict[str, Any] = {}
    for name, value in pairs:
        if name in members:
            shown = name if len(name) <= MAX_NAME_SHOWN else name[:MAX_NAME_SHOWN] + "…"
            raise BadRequest(f"The JSON member {shown!r} appears more than once.")
        members[name] = value
    return members


def _decode_json_object(raw: bytes) -> dict[str, Any]:
    """Strict JSON (msgspec: UTF-8, no lone surrogates, no NaN), then a check for repeated names.

    A repeated member name (``{"owner": "a", "owner": "b"}``) is ambiguous: parsers disagree on
    which one wins, which is how requests get smuggled past a proxy. The standard library
    parser is only asked for the member names, on a body msgspec has already accepted.
    """
    try:
        value = msgspec.json.decode(raw)
        json.loads(raw, object_pairs_hook=_no_duplicate_members)
    except (msgspec.DecodeError, ValueError):  # ValueError: bad UTF-8 inside a string, too
        raise BadRequest("The request body is not valid JSON.") from None
    except RecursionError:  # both parsers give up at the interpreter's recursion limit
        raise BadRequest("The request body is nested too deeply.") from None
    if not isinstance(value, dict):
        raise BadRequest("The request body must be a JSON object.")
    return value


def _decode_form(raw: bytes) -> dict[str, Any]:
    try:
        # errors="strict": a percent-encoded byte sequence that is not UTF-8 is refused too
        pairs = parse_qsl(
            raw.decode("utf-8"), keep_blank_values=True, encoding="utf-8", errors="strict"
        )
    except (UnicodeDecodeError, ValueError):
        raise BadRequest("The form body is not valid UTF-8 form encoding.") from None
    form: dict[str, Any] = {}
    for key, value in pairs:
        if key in form:  # RFC 6749 §3.2: parameters must not be sent more than once
            raise BadRequest(f"The form field {key!r} is sent more than once.")
        form[key] = value
    return form


async def read_json_object(
    request: Request[Any, Any, Any], *, allow_form: bool = False
) -> dict[str, Any]:
    """The body as a dict (empty body: ``{}``); a media type other than JSON (or form) is 415."""
    raw = await request.body()
    return body_object(raw, request.headers.getall("content-type", []), allow_form=allow_form)


def body_object(
    raw: bytes, content_types: list[str], *, allow_form: bool = False
) -> dict[str, Any]:
    """``read_json_object`` on a body already read (the hot-read lane reads its own)."""
    if not raw.strip():
        return {}
    kind = media_type(content_types)
    if kind == JSON or kind.endswith("+json"):
        return _decode_json_object(raw)
    if allow_form and kind == FORM:
        return _decode_form(raw)
    accepted = f"{JSON} or {FORM}" if allow_form else JSON
    raise UnsupportedMediaType(f"The request body must be {accepted}.")


def check_string_fields(
    body: dict[str, Any], required: tuple[str, ...], optional: tuple[str, ...] = ()
) -> None:
    """BadRequest naming every bad field (``errors``), or nothing when all are acceptable."""
    errors = string_field_errors(body, required, optional)
    if errors:
        detail = "; ".join(f"{error.field}: {error.message}" for error in errors)
        raise BadRequest(detail, errors=errors)


def string_field_errors(
    body: dict[str, Any], required: tuple[str, ...], optional: tuple[str, ...] = ()
) -> list[FieldError]:
    """What is wrong with the named string fields: missing, not a string, empty, too long."""
    errors = []
    for name in (*required, *optional):
        value = body.get(name)
        if value is None:
            if name in required:
                errors.append(FieldError(name, "is required"))
        elif not isinstance(value, str):
            errors.append(FieldError(name, "must be a string"))
        elif value == "" and name in required:
            errors.append(FieldError(name, "must not be empty"))
        elif len(value) > MAX_FIELD_LENGTH:
            errors.append(FieldError(name, f"must be at most {MAX_FIELD_LENGTH} characters"))
        elif "\x00" in value:
            errors.append(FieldError(name, "must not contain NUL characters"))
    return errors


# ---------------------------------------------------------------------------------------
# bodies decoded into the Struct that also documents them


@dataclass(frozen=True, slots=True)
class Refused:
    """The API's words for a value a body field's type refuses, written beside the type
    (``Annotated[..., Refused("must be ...")]``); msgspec and the OpenAPI document ignore it."""

    message: str


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
        value = body.get(field.encode_name)
        if field.encode_name not in body:
            if field.required:
                errors.append(FieldError(field.encode_name, "is required"))
            continue
        try:
            msgspec.convert(value, field.type)
        except msgspec.ValidationError as refused:
            message = "is required" if value is None and field.required else None
            errors.append(FieldError(field.encode_name, message or _words(field.type, refused)))
    return errors


def _words(annotated: Any, refused: msgspec.ValidationError) -> str:
    """The field's ``Refused`` message, else msgspec's own."""
    for extra in get_args(annotated)[1:]:
        if isinstance(extra, Refused):
            return extra.message
    return str(refused)
