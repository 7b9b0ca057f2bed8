"""Bodies of the device endpoints (contract §10): commands, readings, the /provider pair."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from litestar.openapi.spec import OpenAPIType, Schema
from litestar.params import KwargDefinition

from devicecontrol.clock import TIMESTAMP_PATTERN
from devicecontrol.controllers.identity import SERIAL_NUMBER
from devicecontrol.controllers.schemas import Reading
from devicecontrol.devices.catalogue import COMMAND_NAME
from devicecontrol.devices.commands.service import MAX_TTL_S, MIN_TTL_S
from devicecontrol.devices.commands.status import CommandStatus
from devicecontrol.http.fields import NO_NUL, Refused
from devicecontrol.http.hal import HalPage, SelfLinks

Timestamp = Annotated[str, msgspec.Meta(pattern=TIMESTAMP_PATTERN)]
COMMAND_NAME_PATTERN = COMMAND_NAME.pattern
_NAME_RULE = f"must match {COMMAND_NAME_PATTERN.strip('^$')}"  # as the catalogue words it


class CommandBody(msgspec.Struct, frozen=True):
    """A command as its owner sees it; `status` is `expired` once `expires_at` has passed
    with no result."""

    id: str
    name: str
    params: dict[str, Any]
    status: CommandStatus
    created: Timestamp
    sent_at: Timestamp | None
    completed_at: Timestamp | None
    expires_at: Timestamp
    result: dict[str, Any] | None
    error: str | None
    links: SelfLinks = msgspec.field(name="_links")


class CommandResponse(msgspec.Struct, frozen=True):
    command: CommandBody
    links: SelfLinks = msgspec.field(name="_links")


class EmbeddedCommands(msgspec.Struct, frozen=True):
    command: list[CommandBody]


class CommandPage(HalPage, frozen=True):
    embedded: EmbeddedCommands = msgspec.field(name="_embedded")


class EmbeddedReadings(msgspec.Struct, frozen=True):
    reading: list[Reading]


class ReadingPage(HalPage, frozen=True):
    embedded: EmbeddedReadings = msgspec.field(name="_embedded")


class ReadingsSummary(msgspec.Struct, frozen=True):
    """The readings in buckets. Each bucket holds `start` (UTC), `count` (readings), one
    object `{"min", "max", "avg"}` per numeric field (a list of numbers, such as a plug's
    `power`, is summed first) and, for a smart plug, `energy_wh`: its power integrated
    over time. `1d` buckets begin at the owner's local midnight (`time_zone`); shorter
    ones at whole multiples of their width in UTC. Empty buckets are left out."""

    serial_number: str
    every: Annotated[str, msgspec.Meta(pattern="^(1m|5m|15m|1h|1d)$")]
    time_zone: str
    since: Timestamp
    until: Timestamp
    buckets: list[dict[str, Any]]


class ReadingsSummaryResponse(msgspec.Struct, frozen=True):
    summary: ReadingsSummary
    links: SelfLinks = msgspec.field(name="_links")


class ProviderCommand(msgspec.Struct, frozen=True):
    """The original API's queued-command shape."""

    id: str = msgspec.field(name="_id")
    status: CommandStatus
    command_name: str = msgspec.field(name="commandName")
    command_params: dict[str, Any] = msgspec.field(name="commandParams")
    device_id: str = msgspec.field(name="deviceId")
    created_at: Timestamp = msgspec.field(name="createdAt")


class ProviderSendResponse(msgspec.Struct, frozen=True):
    provider: ProviderCommand
    links: SelfLinks = msgspec.field(name="_links")


# the latest reading's fields (any) and the link's own `online`, which wins over theirs
ProviderState = Annotated[
    dict[str, Any],
    KwargDefinition(
        schema_extra={
            "description": "The latest reading's fields (none before the first reading), "
            "and `online`: whether the device is connected now.",
            "required": ["online"],
            "properties": {"online": Schema(type=OpenAPIType.BOOLEAN)},
        }
    ),
]


class ProviderFetchResponse(msgspec.Struct, frozen=True):
    provider: ProviderState
    links: SelfLinks = msgspec.field(name="_links")


# Request bodies, as documented in the OpenAPI document; the handlers read them themselves
# (bodies.read_json_object). devices/service.py checks the /provider pair by hand (their
# serial number names the controller, whose 404 comes first) and decodes CommandRequest.

SerialNumberField = Annotated[str, msgspec.Meta(pattern=SERIAL_NUMBER.pattern)]
_ANY_TAKEN = " Taken by some commands; ignored by the others, whatever its value."
StateField = Annotated[
    Any,
    msgspec.Meta(
        description="melissa `send_ir_code`: 0 off, 1 on, 2 idle; bobbie `default_state`: "
        "0-2; smart_plug and bobbie `switch_on_off`: `on` or `off`." + _ANY_TAKEN
    ),
]
ModeField = Annotated[
    Any,
    msgspec.Meta(
        description="melissa `send_ir_code`: 0 auto, 1 fan, 2 heat, 3 cool, 4 dry." + _ANY_TAKEN
    ),
]
TempField = Annotated[Any, msgspec.Meta(description="melissa `send_ir_code`: 16-30." + _ANY_TAKEN)]
FanField = Annotated[
    Any,
    msgspec.Meta(
        description="melissa `send_ir_code`: 0 auto, 1 low, 2 medium, 3 high." + _ANY_TAKEN
    ),
]
TimeField = Annotated[
    Any, msgspec.Meta(description="vicki `set_keepalive_time`: minutes, 1-255." + _ANY_TAKEN)
]


class ProviderSendRequest(msgspec.Struct, frozen=True):
    """The original API's command: `command` and its parameters at the top level, checked
    against the controller type's catalogue. Fields the command does not take are ignored
    (Home Assistant sends its whole `command_log` back with its change). Integers may be
    sent as integral numbers (`22.0`)."""

    serial_number: SerialNumberField
    command: Annotated[str, msgspec.Meta(min_length=1, max_length=64, pattern=NO_NUL)]
    state: StateField = None
    mode: ModeField = None
    temp: TempField = None
    fan: FanField = None
    time: TimeField = None


class ProviderFetchRequest(msgspec.Struct, frozen=True):
    """The controller whose latest reading to fetch."""

    serial_number: SerialNumberField


class CommandRequest(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A command for the controller, checked strictly against its type's catalogue: a
    parameter the command does not take is refused, and so is any other field. Integers
    may be sent as integral numbers (`22.0`)."""

    name: Annotated[str, msgspec.Meta(pattern=COMMAND_NAME_PATTERN), Refused(_NAME_RULE)]
    params: Annotated[dict[str, Any] | None, Refused("must be an object")] = None
    ttl: Annotated[
        Annotated[int, msgspec.Meta(ge=MIN_TTL_S, le=MAX_TTL_S)] | None,
        Refused(f"must be whole seconds, {MIN_TTL_S} to {MAX_TTL_S}"),
    ] = None
