"""Bodies of the geofence endpoints (contract §12), in the original API's shape."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from devicecontrol.controllers.identity import SERIAL_NUMBER
from devicecontrol.devices.schemas import COMMAND_NAME_PATTERN, CommandBody
from devicecontrol.http.fields import Refused
from devicecontrol.http.hal import HalPage, SelfLinks

Flag = Annotated[int, msgspec.Meta(ge=0, le=1)]
MIN_RADIUS_M, MAX_RADIUS_M = 50, 100_000


class GeofenceBody(msgspec.Struct, frozen=True):
    """A geofence as the original API shows it: `controller_id` is the controller's serial
    number, the commands' fields are JSON-encoded strings, the flags 0 or 1."""

    id: int
    controller_id: str
    user_id: int
    latitude: float
    longitude: float
    radius: int
    enter_command_name: str
    enter_command_fields: str
    exit_command_name: str
    exit_command_fields: str
    active: Flag
    enter_push: Flag
    exit_push: Flag
    links: SelfLinks = msgspec.field(name="_links")


class GeofenceResponse(msgspec.Struct, frozen=True):
    geofence: GeofenceBody
    links: SelfLinks = msgspec.field(name="_links")


class EmbeddedGeofences(msgspec.Struct, frozen=True):
    geofence: list[GeofenceBody]


class GeofencePage(HalPage, frozen=True):
    embedded: EmbeddedGeofences = msgspec.field(name="_embedded")


class CrossingResponse(msgspec.Struct, frozen=True):
    """Where the phone now is, and the command that fired (null: none, because nothing was
    crossed, it was the first report, or the geofence is inactive)."""

    inside: bool
    command: CommandBody | None
    links: SelfLinks = msgspec.field(name="_links")


# Request bodies, as documented. Fields not listed are ignored (apps send whole geofences
# back). The service decodes LocationRequest, and checks a geofence's place and flags as
# these types (fields.field_value); the rest it checks by hand: the controller first (its
# 404), the commands against the catalogue, and a change merged with the stored geofence.

Latitude = Annotated[float, msgspec.Meta(ge=-90, le=90), Refused("must be a number from -90 to 90")]
Longitude = Annotated[
    float, msgspec.Meta(ge=-180, le=180), Refused("must be a number from -180 to 180")
]
Radius = Annotated[
    int,
    msgspec.Meta(ge=MIN_RADIUS_M, le=MAX_RADIUS_M, description="Metres."),
    Refused(f"must be whole metres, {MIN_RADIUS_M} to {MAX_RADIUS_M}"),
]
CommandName = Annotated[str, msgspec.Meta(pattern=COMMAND_NAME_PATTERN)]
CommandFields = Annotated[
    dict[str, Any] | str,
    msgspec.Meta(
        description="The command's parameters, an object or its JSON text (as the original "
        "shows it), checked against the controller type's catalogue."
    ),
]
FlagField = (
    Annotated[int, msgspec.Meta(ge=0, le=1, description="0 or 1."), Refused("must be 0 or 1")]
    | bool
)


class GeofenceRequest(msgspec.Struct, frozen=True):
    """A new geofence of one of the caller's controllers. Both commands are checked against
    the controller type's catalogue. `active` defaults to 1, the push flags to 0."""

    controller_id: Annotated[str, msgspec.Meta(pattern=SERIAL_NUMBER.pattern)]
    latitude: Latitude
    longitude: Longitude
    radius: Radius
    enter_command_name: CommandName
    exit_command_name: CommandName
    enter_command_fields: CommandFields | None = None
    exit_command_fields: CommandFields | None = None
    active: FlagField | None = None
    enter_push: FlagField | None = None
    exit_push: FlagField | None = None


class GeofenceChange(msgspec.Struct, frozen=True):
    """The fields to change (null or absent: unchanged); the result is checked whole. The
    controller cannot change."""

    latitude: Latitude | None = None
    longitude: Longitude | None = None
    radius: Radius | None = None
    enter_command_name: CommandName | None = None
    exit_command_name: CommandName | None = None
    enter_command_fields: CommandFields | None = None
    exit_command_fields: CommandFields | None = None
    active: FlagField | None = None
    enter_push: FlagField | None = None
    exit_push: FlagField | None = None


class LocationRequest(msgspec.Struct, frozen=True):
    """Where the phone is now."""

    latitude: Latitude
    longitude: Longitude
