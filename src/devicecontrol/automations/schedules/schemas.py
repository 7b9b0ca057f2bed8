"""Bodies of the schedule endpoints (contract §12)."""

from __future__ import annotations

from typing import Annotated

import msgspec

from devicecontrol.automations.geofences.schemas import CommandFields, CommandName, Flag, FlagField
from devicecontrol.clock import TIMESTAMP_PATTERN
from devicecontrol.controllers.identity import SERIAL_NUMBER
from devicecontrol.http.hal import HalPage, SelfLinks

Timestamp = Annotated[str, msgspec.Meta(pattern=TIMESTAMP_PATTERN)]
HHMM_PATTERN = "^([01][0-9]|2[0-3]):[0-5][0-9]$"
Days = Annotated[
    str, msgspec.Meta(pattern="^[01]{7}$", description="Monday first; 1 = fires that day.")
]
WallTime = Annotated[str, msgspec.Meta(pattern=HHMM_PATTERN, description="HH:MM, local.")]
TimeZone = Annotated[
    str,
    msgspec.Meta(
        min_length=1,
        max_length=64,
        description="IANA time zone; default the owner's profile's (its city's), else UTC.",
    ),
]


class ScheduleBody(msgspec.Struct, frozen=True):
    """A schedule: `controller_id` is the controller's serial number, the commands' fields
    JSON-encoded strings (as geofences show them); `next_fire_at`, `last_fired_at` are UTC."""

    id: int
    controller_id: str
    user_id: int
    days: str
    from_time: str
    to_time: str | None
    command_name: str
    command_fields: str
    end_command_name: str | None
    end_command_fields: str | None
    time_zone: str
    active: Flag
    next_fire_at: Timestamp | None
    last_fired_at: Timestamp | None
    last_command_id: str | None
    links: SelfLinks = msgspec.field(name="_links")


class ScheduleResponse(msgspec.Struct, frozen=True):
    schedule: ScheduleBody
    links: SelfLinks = msgspec.field(name="_links")


class EmbeddedSchedules(msgspec.Struct, frozen=True):
    schedule: list[ScheduleBody]


class SchedulePage(HalPage, frozen=True):
    embedded: EmbeddedSchedules = msgspec.field(name="_embedded")


class ScheduleRequest(msgspec.Struct, frozen=True):
    """A weekly schedule of one of the caller's controllers: the command at `from_time` on
    each day on, and the end command (if any; it needs `to_time`) at `to_time` (the next
    day when it is not after `from_time`). Commands are checked against the catalogue."""

    controller_id: Annotated[str, msgspec.Meta(pattern=SERIAL_NUMBER.pattern)]
    days: Days
    from_time: WallTime
    command_name: CommandName
    to_time: WallTime | None = None
    command_fields: CommandFields | None = None
    end_command_name: CommandName | None = None
    end_command_fields: CommandFields | None = None
    time_zone: TimeZone | None = None
    active: FlagField | None = None


class ScheduleChange(msgspec.Struct, frozen=True):
    """The fields to change (absent: unchanged; `to_time` and `end_command_name` may be set
    to null); the result is checked whole and its next firing worked out again."""

    days: Days | None = None
    from_time: WallTime | None = None
    command_name: CommandName | None = None
    to_time: WallTime | None = None
    command_fields: CommandFields | None = None
    end_command_name: CommandName | None = None
    end_command_fields: CommandFields | None = None
    time_zone: TimeZone | None = None
    active: FlagField | None = None
