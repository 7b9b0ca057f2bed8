"""Controller and assignment-record bodies, and the serial number every controller path
names."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from litestar.openapi.spec import OpenAPIType, Schema
from litestar.params import KwargDefinition, PathParameter

from devicecontrol.clock import TIMESTAMP_PATTERN
from devicecontrol.controllers.identity import SERIAL_NUMBER
from devicecontrol.http.fields import OptionalField, Refused
from devicecontrol.http.hal import HalPage, SelfLinks
from devicecontrol.users.identity import MAX_EMAIL_LENGTH

# documentation only: the service answers a malformed serial number with the usual 404
SerialNumber = Annotated[
    str,
    PathParameter(
        description="1-64 characters of A-Z a-z 0-9 _ -; anything else is an unknown controller.",
        schema_extra={"pattern": SERIAL_NUMBER.pattern},
    ),
]

# a reading as the API shows it (devices.readings.shown_reading): what the device reported,
# plus the arrival time; documented with schema_extra, which Litestar reads (msgspec.Meta's
# extra_json_schema it does not)
READING_SCHEMA = Schema(
    type=OpenAPIType.OBJECT,
    description="The fields the device reported, plus `created`: when it arrived (UTC).",
    required=["created"],
    properties={"created": Schema(type=OpenAPIType.STRING, pattern=TIMESTAMP_PATTERN)},
)
Reading = Annotated[
    dict[str, Any],
    KwargDefinition(
        schema_extra={
            "description": READING_SCHEMA.description,
            "required": READING_SCHEMA.required,
            "properties": READING_SCHEMA.properties,
        }
    ),
]
ControllerLog = Annotated[
    dict[str, Any] | list[Any],
    KwargDefinition(
        schema_extra={
            "one_of": [READING_SCHEMA, Schema(type=OpenAPIType.ARRAY, max_items=0)],
            "description": "The latest reading of the current ownership, or `[]` when none.",
        }
    ),
]


class ControllerBody(msgspec.Struct, frozen=True):
    user_id: int | None
    serial_number: str
    mac: str
    firmware_version: str
    name: str
    type: str
    room_id: int | None
    online: bool
    brand_id: int
    controller_log: ControllerLog
    links: SelfLinks = msgspec.field(name="_links")


class CommandLog(msgspec.Struct, frozen=True):
    """A melissa's settings as Home Assistant reads them: those of its last `send_ir_code`
    for the current owner, else off, auto, 20 °C, auto fan."""

    state: Annotated[int, msgspec.Meta(ge=0, le=2)]
    mode: Annotated[int, msgspec.Meta(ge=0, le=4)]
    temp: Annotated[int, msgspec.Meta(ge=16, le=30)]
    fan: Annotated[int, msgspec.Meta(ge=0, le=3)]


class ControllerRelation(msgspec.Struct, frozen=True):
    command_log: CommandLog | None  # null for types other than melissa


class ControllerDetail(ControllerBody, frozen=True):
    """A controller as the single read shows it: the list's body plus ``_relation``."""

    relation: ControllerRelation = msgspec.field(name="_relation")


class ControllerResponse(msgspec.Struct, frozen=True):
    controller: ControllerDetail
    links: SelfLinks = msgspec.field(name="_links")


class EmbeddedControllers(msgspec.Struct, frozen=True):
    controller: list[ControllerBody]


class ControllerPage(HalPage, frozen=True):
    embedded: EmbeddedControllers = msgspec.field(name="_embedded")


class AssignmentRecord(msgspec.Struct, frozen=True):
    id: int
    user_id: int
    serial_number: str
    mac: str
    firmware_version: str
    name: str
    type: str
    device_group: str
    status_push: int
    room_id: int | None
    created: str
    assigned_at: str
    deleted_at: str | None


class AssignmentResponse(msgspec.Struct, frozen=True):
    controller_reassign: AssignmentRecord
    links: SelfLinks = msgspec.field(name="_links")


class EmbeddedAssignments(msgspec.Struct, frozen=True):
    controller_reassign: list[AssignmentRecord]


class AssignmentPage(HalPage, frozen=True):
    embedded: EmbeddedAssignments = msgspec.field(name="_embedded")


# Request bodies: the OpenAPI document shows them, and the handlers decode the body into
# them (fields.decode_body); the service checks the rest (an owner's address, a claim code).


class AssignRequest(msgspec.Struct, frozen=True):
    """Optional: an empty body counts as `{}`. A controller provisioned with a claim code
    needs it here."""

    claim_code: OptionalField = None


class ReassignRequest(msgspec.Struct, frozen=True):
    """The account to hand the controller over to, matched case-insensitively: one `@`, no
    spaces or control characters, a dot in the domain."""

    owner: Annotated[
        str,
        msgspec.Meta(max_length=MAX_EMAIL_LENGTH, extra_json_schema={"format": "email"}),
        Refused(f"must be an e-mail address of at most {MAX_EMAIL_LENGTH} characters"),
    ]
