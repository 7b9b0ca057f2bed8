"""Controllers as the pages show them, read through the API's own service."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Row

from devicecontrol.controllers import service as controllers
from devicecontrol.devices.readings.service import joined_controller_log
from devicecontrol.runtime import Runtime


@dataclass(frozen=True, slots=True)
class ShownController:
    serial_number: str
    name: str
    type: str
    room_id: int | None
    online: bool
    mac: str
    firmware_version: str | None
    reading: dict[str, Any] | list[Any]  # the latest of this ownership, or []


def one_controller(row: Row[Any]) -> ShownController:
    """A row of ``controllers.repository.BODY_COLUMNS``, as the list and the page show it."""
    return ShownController(
        serial_number=row.serial_number,
        name=row.name or "",
        type=row.type,
        room_id=row.room_id,
        online=bool(row.online),
        mac=row.mac,
        firmware_version=row.firmware_version,
        reading=joined_controller_log(row.log_payload, row.log_created_at),
    )


async def controller_rows(runtime: Runtime, user_id: int) -> tuple[list[ShownController], int]:
    """The viewer's controllers, as many as one page of the API holds, and how many in all."""
    query = controllers.build_query(
        runtime, type_=None, mac=None, page=1, page_size=runtime.settings.max_page_size
    )
    page = await controllers.list_controllers(runtime, user_id, query)
    return [one_controller(row) for row in page.rows], page.total
