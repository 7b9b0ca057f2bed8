"""What a controller did lately, as its page shows it: its latest readings and commands of
the current ownership, read through the API's own services."""

from __future__ import annotations

from typing import Any

from devicecontrol.database.pages import PageRequest
from devicecontrol.devices.commands import service as commands
from devicecontrol.devices.commands.service import OwnedDevice
from devicecontrol.devices.readings.service import list_readings, shown_reading
from devicecontrol.runtime import Runtime

SHOWN = 10  # the page's lists: the newest ten; live ones are added on top


async def latest_readings(runtime: Runtime, device: OwnedDevice) -> list[dict[str, Any]]:
    page = await list_readings(runtime, device, PageRequest(1, SHOWN), since=None, until=None)
    return [shown_reading(row.payload, row.created_at) for row in page.rows]


async def latest_commands(runtime: Runtime, device: OwnedDevice) -> list[dict[str, Any]]:
    page = await commands.list_commands(runtime, device, PageRequest(1, SHOWN))
    return [commands.shown(row) for row in page.rows]
