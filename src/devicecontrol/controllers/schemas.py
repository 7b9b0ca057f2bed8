"""Controller and assignment-record bodies."""

from __future__ import annotations

import msgspec

from devicecontrol.hal import PageLinks, SelfLinks


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
