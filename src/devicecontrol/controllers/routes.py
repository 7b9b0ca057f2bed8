"""The controller endpoints: thin handlers that call one service function each."""

from __future__ import annotations

from typing import Annotated, Any, TypeVar

from litestar import Controller, Request, delete, get, patch, post
from litestar.di import NamedDependency
from litestar.params import QueryParameter
from sqlalchemy import Row

from devicecontrol.auth.schemas import Caller
from devicecontrol.clock import format_timestamp
from devicecontrol.controllers import service
from devicecontrol.controllers.schemas import (
    AssignmentPage,
    AssignmentRecord,
    AssignmentResponse,
    AssignRequest,
    ControllerBody,
    ControllerDetail,
    ControllerPage,
    ControllerRelation,
    ControllerResponse,
    EmbeddedAssignments,
    EmbeddedControllers,
    ReassignRequest,
    SerialNumber,
)
from devicecontrol.devices.readings.service import joined_controller_log
from devicecontrol.http.bodies import read_json_object
from devicecontrol.http.fields import NO_NUL, decode_body
from devicecontrol.http.hal import HAL_JSON, controller_path, page_members, self_links
from devicecontrol.http.openapi import BEARER, ApiOperation, problems, with_body
from devicecontrol.http.paging import PageNumber, PageSize, page_request
from devicecontrol.runtime import Runtime

# a query value is never null (absent is None); the service checks what the patterns say
TypeFilter = Annotated[
    str | None,
    QueryParameter(
        max_length=64,
        description="Exact controller type, such as `smart_plug`; empty means no filter.",
        schema_extra={"one_of": None, "type": "string", "pattern": NO_NUL},
    ),
]
MacFilter = Annotated[
    str | None,
    QueryParameter(
        max_length=64,
        description="Hardware address, compared after removing `:` `-` `.` and upper-casing; "
        "empty means no filter.",
        schema_extra={"one_of": None, "type": "string", "pattern": "^[0-9A-Fa-f:.-]*$"},
    ),
]


Body = TypeVar("Body", bound=ControllerBody)


def controller_body(row: Row, kind: type[Body] = ControllerBody, **more: Any) -> Body:  # type: ignore[assignment]
    """A controller as the list shows it, from ``controllers.repository.BODY_COLUMNS``;
    ``kind`` and ``more`` make the single read's larger body (``ControllerDetail``)."""
    return kind(
        **more,
        user_id=row.user_id,
        serial_number=row.serial_number,
        mac=row.mac,
        firmware_version=row.firmware_version,
        name=row.name,
        type=row.type,
        room_id=row.room_id,
        online=bool(row.online),
        brand_id=row.brand_id,
        controller_log=joined_controller_log(row.log_payload, row.log_created_at),
        links=self_links(controller_path(row.serial_number)),
    )


def assignment_record(record: Row) -> AssignmentRecord:
    return AssignmentRecord(
        id=record.id,
        user_id=record.user_id,
        serial_number=record.serial_number,
        mac=record.mac,
        firmware_version=record.firmware_version,
        name=record.name,
        type=record.type,
        device_group=record.device_group,
        status_push=record.status_push,
        room_id=record.room_id,
        created=format_timestamp(record.created_at) or "",
        assigned_at=format_timestamp(record.assigned_at) or "",
        deleted_at=format_timestamp(record.deleted_at),
    )


def assignment_response(record: Row) -> AssignmentResponse:
    return AssignmentResponse(
        controller_reassign=assignment_record(record),
        links=self_links(controller_path(record.serial_number) + "/assign"),
    )


async def controller_page(
    runtime: Runtime,
    user_id: int,
    *,
    type_: str | None,
    mac: str | None,
    page: str | None,
    page_size: str | None,
) -> ControllerPage:
    """``GET /controllers``: one page of the caller's controllers, as HAL.

    Shared by the handler below and the hot-read lane (``hot_reads.py``).
    """
    query = service.build_query(runtime, type_=type_, mac=mac, page=page, page_size=page_size)
    result = await service.list_controllers(runtime, user_id, query)
    filters = {"type": query.type, "mac": query.mac}
    return ControllerPage(
        embedded=EmbeddedControllers(controller=[controller_body(r) for r in result.rows]),
        **page_members(runtime.settings, query.paging, result, "/controllers", filters),
    )


async def controller_read(runtime: Runtime, user_id: int, serial_number: str) -> ControllerResponse:
    """``GET /controllers/{sn}``: the caller's controller with its ``_relation``, as HAL."""
    detail = await service.controller_detail(runtime, user_id, serial_number)
    return controller_document(detail, serial_number)


def controller_document(detail: service.ControllerView, serial_number: str) -> ControllerResponse:
    """The single read's HAL document; the hot-read lane (``hot_reads.py``) builds it too."""
    controller = controller_body(
        detail.row,
        ControllerDetail,
        # a dict of CommandLog's shape: encoded as is, not converted on the hot path
        relation=ControllerRelation(command_log=detail.command_log),  # type: ignore[arg-type]
    )
    return ControllerResponse(
        controller=controller, links=self_links(controller_path(serial_number))
    )


class ControllersController(Controller):
    path = "/controllers"
    tags = ["controllers"]  # noqa: RUF012
    security = BEARER

    @get(
        "/",
        media_type=HAL_JSON,
        summary="The caller's controllers, paged",
        operation_class=ApiOperation,
        responses=problems(400, 401, 503),
    )
    async def list_controllers(
        self,
        request: Request[Caller, Any, Any],
        runtime: NamedDependency[Runtime],
        type: TypeFilter = None,  # named as sent, so that its 400 names the field "type"
        mac: MacFilter = None,
        page: PageNumber = None,
        page_size: PageSize = None,
    ) -> ControllerPage:
        return await controller_page(
            runtime, request.user.user_id, type_=type, mac=mac, page=page, page_size=page_size
        )

    @get(
        "/{serial_number:str}",
        media_type=HAL_JSON,
        summary="One of the caller's controllers",
        operation_class=ApiOperation,
        responses=problems(401, 404, 503),
    )
    async def read_controller(
        self,
        request: Request[Caller, Any, Any],
        runtime: NamedDependency[Runtime],
        serial_number: SerialNumber,
    ) -> ControllerResponse:
        return await controller_read(runtime, request.user.user_id, serial_number)

    @post(
        "/{serial_number:str}/assign",
        status_code=200,
        media_type=HAL_JSON,
        summary="Claim an unowned controller",
        operation_class=with_body(ApiOperation, AssignRequest, required=False),
        responses=problems(400, 401, 403, 404, 409, 413, 415, 429, 503),
    )
    async def assign(
        self,
        request: Request[Caller, Any, Any],
        runtime: NamedDependency[Runtime],
        serial_number: SerialNumber,
    ) -> AssignmentResponse:
        body = decode_body(await read_json_object(request), AssignRequest)
        record = await service.assign_controller(
            runtime, request.user.user_id, serial_number, claim_code=body.claim_code
        )
        return assignment_response(record)

    @patch(
        "/{serial_number:str}/reassign",
        media_type=HAL_JSON,
        summary="Hand over to another account",
        operation_class=with_body(ApiOperation, ReassignRequest),
        responses=problems(400, 401, 404, 409, 413, 415, 422, 503),
    )
    async def reassign(
        self,
        request: Request[Caller, Any, Any],
        runtime: NamedDependency[Runtime],
        serial_number: SerialNumber,
    ) -> AssignmentResponse:
        body = decode_body(await read_json_object(request), ReassignRequest)
        record = await service.reassign_controller(
            runtime, request.user.user_id, serial_number, new_owner=body.owner
        )
        return assignment_response(record)

    @delete(
        "/{serial_number:str}/assign",
        status_code=200,
        media_type=HAL_JSON,
        summary="Release the caller's controller (it becomes claimable again)",
        operation_class=ApiOperation,
        responses=problems(401, 404, 503),
    )
    async def release(
        self,
        request: Request[Caller, Any, Any],
        runtime: NamedDependency[Runtime],
        serial_number: SerialNumber,
    ) -> AssignmentResponse:
        record = await service.release_controller(runtime, request.user.user_id, serial_number)
        return assignment_response(record)

    @get(
        "/{serial_number:str}/assignments",
        media_type=HAL_JSON,
        summary="Ownership history of the caller's controller, newest first",
        operation_class=ApiOperation,
        responses=problems(400, 401, 404, 503),
    )
    async def assignments(
        self,
        request: Request[Caller, Any, Any],
        runtime: NamedDependency[Runtime],
        serial_number: SerialNumber,
        page: PageNumber = None,
        page_size: PageSize = None,
    ) -> AssignmentPage:
        paging = page_request(runtime.settings, page, page_size)
        result = await service.assignment_history(
            runtime, request.user.user_id, serial_number, paging
        )
        return AssignmentPage(
            embedded=EmbeddedAssignments(
                controller_reassign=[assignment_record(row) for row in result.rows]
            ),
            **page_members(
                runtime.settings, paging, result, controller_path(serial_number) + "/assignments"
            ),
        )
