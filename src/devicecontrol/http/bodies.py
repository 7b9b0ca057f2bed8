"""Reading request bodies: JSON objects everywhere, form bodies on the token endpoints too."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qsl

import msgspec
from litestar import Request

from devicecontrol.errors import BadRequest, UnsupportedMediaType

JSON = "application/json"
FORM = "application/x-www-form-urlencoded"
MAX_NAME_SHOWN = 64  # of a repeated member name, in the error detail


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
