"""A controller's geofences as its page shows and changes them, through the API's geofence
services; what enters and exits fire is picked as a schedule's is (schedules.py)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Row

from devicecontrol.automations.geofences import service as geofences
from devicecontrol.errors import NotFound
from devicecontrol.runtime import Runtime
from devicecontrol.webapp.schedules import picked_command


def geofence_body(serial_number: str, device_type: str, form: dict[str, str]) -> dict[str, Any]:
    """The API's body of a new geofence, from the page's form (numbers as the API's JSON
    carries them; anything else left as typed, for the API's checks to name)."""
    body: dict[str, Any] = {"controller_id": serial_number}
    for field in ("latitude", "longitude", "radius"):
        text = form.get(field, "").strip()
        try:
            body[field] = int(text) if field == "radius" else float(text)
        except ValueError:
            body[field] = text
    for side in ("enter", "exit"):
        name, fields = picked_command(device_type, form.get(f"{side}_action", ""))
        body[f"{side}_command_name"], body[f"{side}_command_fields"] = name, fields
    return body


async def geofences_of(runtime: Runtime, user_id: int, serial_number: str) -> list[Row[Any]]:
    return await geofences.controller_geofences(runtime, user_id, serial_number)


async def geofence_of(
    runtime: Runtime, user_id: int, serial_number: str, geofence_id: str
) -> Row[Any]:
    """The owner's geofence of this controller; another's, or another controller's, 404."""
    row = await geofences.get_geofence(runtime, user_id, geofence_id)
    if row.serial_number != serial_number:
        raise NotFound(f"No geofence {geofence_id[:32]} of controller {serial_number} is yours.")
    return row
