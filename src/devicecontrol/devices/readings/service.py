"""Readings: what devices report, stored with their arrival time and shown to the owner.

A reading belongs to the ownership in force when it arrived (its assignment record), so a
new owner never sees what the previous one's device reported.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, NamedTuple

import msgspec
from sqlalchemy import Row

from devicecontrol.clock import format_timestamp
from devicecontrol.database.pages import Page, PageRequest
from devicecontrol.devices.commands.service import LatestReading, OwnedDevice
from devicecontrol.devices.readings import repository as readings_repository
from devicecontrol.runtime import Runtime

MAX_PAYLOAD_BYTES = 4096
# contract §9 Limits: a payload nested deeper than this is not JSON we take
MAX_PAYLOAD_DEPTH = 32
_decode = msgspec.json.decode
_encode = msgspec.json.encode


class RejectedPayload(ValueError):
    """A device message that is dropped; ``reason`` is the metrics' label."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def parse_object(payload: bytes) -> dict[str, Any]:
    """A device payload as a JSON object of at most 4 KiB and 32 levels, or RejectedPayload.

    The decoder itself gives up (RecursionError) long before 4 KiB of brackets end; that,
    too, is ``not_json``, never a traceback.
    """
    if len(payload) > MAX_PAYLOAD_BYTES:
        raise RejectedPayload("too_large")
    try:
        value = _decode(payload)
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        raise RejectedPayload("not_json") from None
    if not isinstance(value, dict):
        raise RejectedPayload("not_an_object")
    if _depth(value) > MAX_PAYLOAD_DEPTH:
        raise RejectedPayload("not_json")
    return value


def _depth(value: Any) -> int:
    """How deeply objects and arrays nest in ``value`` (an object alone is 1); iterative,
    so that no payload can exhaust the interpreter's stack."""
    deepest = 0
    pending: list[tuple[Any, int]] = [(value, 1)]
    while pending:
        item, level = pending.pop()
        children = item.values() if isinstance(item, dict) else item
        deepest = max(deepest, level)
        pending.extend((child, level + 1) for child in children if isinstance(child, dict | list))
    return deepest


class Storable(NamedTuple):
    """A ``state`` payload as it is stored, and its field names."""

    payload: bytes
    names: tuple[str, ...]


def storable_reading(payload: bytes) -> Storable:
    """What a ``state`` payload is stored as: its object without the keys that begin with
    ``_`` (HAL reserves them: a device's ``_links`` would pass into the bodies), or
    ``RejectedPayload`` when it is dropped."""
    value = parse_object(payload)
    if not any(key.startswith("_") for key in value):
        return Storable(payload, tuple(value))
    kept = {k: v for k, v in value.items() if not k.startswith("_")}
    return Storable(_encode(kept), tuple(kept))


def shown_reading(payload: str, created_at: datetime) -> dict[str, Any]:
    """A reading as the API shows it: the reported fields plus ``created``."""
    return {**_decode(payload), "created": format_timestamp(created_at)}


def controller_log(
    latest: Row[Any] | None, assignment_id: int | None
) -> dict[str, Any] | list[Any]:
    """``controller_log`` of a controller body: its latest reading of the current ownership,
    else ``[]`` (as the original interface shows)."""
    if latest is None or assignment_id is None or latest.assignment_id != assignment_id:
        return []
    return shown_reading(latest.payload, latest.created_at)


def joined_controller_log(
    payload: str | None, created_at: datetime | None
) -> dict[str, Any] | list[Any]:
    """``controller_log`` from a controller row that joined the latest reading of its current
    ownership (controllers.repository.BODY_COLUMNS): none joined is ``[]``."""
    if payload is None or created_at is None:
        return []
    return shown_reading(payload, created_at)


def provider_fetch(device: OwnedDevice, latest: LatestReading | None) -> dict[str, Any]:
    """``/provider/fetch``: the latest reading's fields with the link's ``online`` (it wins);
    a reading of an earlier ownership is not shown."""
    fields: dict[str, Any] = {}
    if latest is not None and latest.assignment_id == device.assignment_id:
        fields = _decode(latest.payload)
    return {**fields, "online": device.online}


async def list_readings(
    runtime: Runtime,
    device: OwnedDevice,
    paging: PageRequest,
    *,
    since: datetime | None,
    until: datetime | None,
) -> Page:
    async with runtime.database.read() as connection:
        total = await readings_repository.count_readings(
            connection, device.controller_id, device.assignment_id, since=since, until=until
        )
        rows = []
        if paging.offset < total:  # past the end (or past what OFFSET holds): no query
            rows = await readings_repository.list_readings(
                connection,
                device.controller_id,
                device.assignment_id,
                since=since,
                until=until,
                offset=paging.offset,
                limit=paging.page_size,
            )
    return Page(rows=rows, total=total, page_count=paging.page_count(total))
