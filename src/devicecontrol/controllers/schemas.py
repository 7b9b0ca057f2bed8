"""Controller and assignment-record bodies."""

from __future__ import annotations

from typing import Annotated

import msgspec

from devicecontrol.hal import PageLinks, SelfLinks
from devicecontrol.openapi import OptionalField
from devicecontrol.users.identity import MAX_EMAIL_LENGTH


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
    controller_log: list[dict[str, object]]
    links: SelfLinks = msgspec.field(name="_links")


class ControllerResponse(msgspec.Struct, frozen=True):
    controller: ControllerBody
    links: SelfLinks = msgspec.field(name="_links")


class EmbeddedControllers(msgspec.Struct, frozen=True):
    controller: list[ControllerBody]


class ControllerPage(msgspec.Struct, frozen=True):
    embedded: EmbeddedControllers = msgspec.field(name="_embedded")
    total: int
    page: int
    page_size: int
    page_count: int
    links: PageLinks = msgspec.field(name="_links")


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


class AssignmentPage(msgspec.Struct, frozen=True):
    embedded: EmbeddedAssignments = msgspec.field(name="_embedded")
    total: int
    page: int
    page_size: int
    page_count: int
    links: PageLinks = msgspec.field(name="_links")


# Request bodies, as documented in the OpenAPI document; the handlers read and check them
# themselves (bodies.read_json_object, bodies.string_field_errors, the services).


class AssignRequest(msgspec.Struct, frozen=True):
    """Optional: an empty body counts as `{}`. A controller provisioned with a claim code
    needs it here."""

    claim_code: OptionalField = None


class ReassignRequest(msgspec.Struct, frozen=True):
    """The account to hand the controller over to, matched case-insensitively: one `@`, no
    spaces or control characters, a dot in the domain."""

    owner: Annotated[
        str, msgspec.Meta(max_length=MAX_EMAIL_LENGTH, extra_json_schema={"format": "email"})
    ]
