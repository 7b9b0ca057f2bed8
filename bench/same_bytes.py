"""Before a comparison server is measured, its answers must be the service's, byte for byte.

Compared: the status, the body's bytes and the headers (content-type, content-length and
any other the service sends; not ``date``, which uvicorn sets on every server). The one
header whose value differs on every request, ``x-request-id``, must be there and be 32
lower-case hex digits, as the service's are. The first request of the scenario is compared
with the service's captured answer (the one the ceiling replays), the next ones with what
the service answers to the same requests now.
"""

from __future__ import annotations

import re
from pathlib import Path

from bench.capture import Answer, fetch, load
from bench.scenarios import Request

SAMPLE = 20  # requests of the scenario's rotation checked (both controller types show up)
REQUEST_ID = "x-request-id"
_REQUEST_ID_VALUE = re.compile(r"[0-9a-f]{32}")
_CONTEXT_BYTES = 40


class Mismatch(RuntimeError):
    """A comparison server's answer is not the service's."""


def _comparable_headers(answer: Answer) -> list[tuple[str, str]]:
    """Sorted, with a well-formed request id replaced by a placeholder."""
    headers = []
    for name, value in answer.headers:
        if name == REQUEST_ID and _REQUEST_ID_VALUE.fullmatch(value):
            value = "<32 hex digits>"
        headers.append((name, value))
    return sorted(headers)


def _body_difference(expected: bytes, got: bytes) -> str:
    at = next(
        (i for i, (a, b) in enumerate(zip(expected, got, strict=False)) if a != b),
        min(len(expected), len(got)),
    )
    start = max(0, at - _CONTEXT_BYTES // 2)
    return (
        f"bodies differ at byte {at} ({len(got)} B, expected {len(expected)} B): "
        f"{got[start : start + _CONTEXT_BYTES]!r} where the service sent "
        f"{expected[start : start + _CONTEXT_BYTES]!r}"
    )


def difference(expected: Answer, got: Answer) -> str | None:
    """What differs between the service's answer and another, first thing first; or None."""
    if got.status != expected.status:
        return f"status {got.status}, the service's {expected.status}: {got.body[:200]!r}"
    if got.body != expected.body:
        return _body_difference(expected.body, got.body)
    mine, theirs = _comparable_headers(got), _comparable_headers(expected)
    if mine != theirs:
        return f"headers {mine}, the service's {theirs}"
    return None


def check(port: int, service_port: int, captured: Path, requests: list[Request]) -> None:
    """Raise ``Mismatch`` naming the first request whose answer is not the service's."""
    for index, request in enumerate(requests[:SAMPLE]):
        expected = load(captured) if index == 0 else fetch(service_port, request)
        problem = difference(expected, fetch(port, request))
        if problem is not None:
            raise Mismatch(f"{request.method} {request.path}: {problem}")
