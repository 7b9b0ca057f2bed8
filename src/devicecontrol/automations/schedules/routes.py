"""The schedule endpoints (contract §12): thin handlers over schedules/service.py."""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Controller, Request, Response, delete, get, patch, post
from litestar.di import NamedDependency
from litestar.params import PathParameter
from sqlalchemy import Row

from devicecontrol.auth.schemas import Caller
from devicecontrol.automations.schedules import service
from devicecontrol.automations.schedules.schemas import (
    EmbeddedSchedules,
    ScheduleBody,
    ScheduleChange,
    SchedulePage,
    ScheduleRequest,
    ScheduleResponse,
)
from devicecontrol.clock import format_timestamp
from devicecontrol.controllers.schemas import SerialNumber
from devicecontrol.http.bodies import read_json_object
from devicecontrol.http.hal import HAL_JSON, created, page_members, self_links
from devicecontrol.http.openapi import BEARER, ApiOperation, location, problems, with_body
from devicecontrol.http.paging import PageNumber, PageSize, page_request
from devicecontrol.runtime import Runtime

ScheduleId = Annotated[
    str,
    PathParameter(
        description="The schedule's `id`; anything else is an unknown schedule.",
        schema_extra={"pattern": "^[1-9][0-9]{0,9}$"},
    ),
]
_404 = (
    "No such controller among the caller's, or no such schedule of it (unknown, another "
    "account's, or not an id)."
)
_CREATE_404 = "`controller_id` names no controller of the caller's."


def schedule_path(serial_number: str, schedule_id: int) -> str:
    return f"/schedules/{serial_number}/{schedule_id}"


def schedule_body(row: Row[Any]) -> ScheduleBody:
    return ScheduleBody(
        id=row.id,
        controller_id=row.serial_number,
        user_id=row.user_id,
        days=row.days,
        from_time=row.from_time,
        to_time=row.to_time,
        command_name=row.command_name,
        command_fields=row.command_fields,
        end_command_name=row.end_command_name,
        end_command_fields=row.end_command_fields,
        time_zone=row.time_zone,
        active=int(row.active),
        next_fire_at=format_timestamp(row.next_fire_at),
        last_fired_at=format_timestamp(row.last_fired_at),
        last_command_id=row.last_command_id,
        links=self_links(schedule_path(row.serial_number, row.id)),
    )


def schedule_response(row: Row[Any]) -> ScheduleResponse:
    body = schedule_body(row)
    return ScheduleResponse(schedule=body, links=body.links)


class SchedulesController(Controller):
    """The caller's weekly schedules."""

    path = "/schedules"
    tags = ["automation"]  # noqa: RUF012
    security = BEARER

    @post(
        "/",
        status_code=201,
        media_type=HAL_JSON,
        summary="Make a schedule",
        operation_class=with_body(ApiOperation, ScheduleRequest),
        response_headers=location("The new schedule's path (`/v1/schedules/<sn>/<id>`)."),
        responses=problems(400, 401, 404, 413, 415, 503, descriptions={404: _CREATE_404}),
    )
    async def create_schedule(
        self, request: Request[Caller, Any, Any], runtime: NamedDependency[Runtime]
    ) -> Response[ScheduleResponse]:
        body = await read_json_object(request)
        row = await service.create_schedule(runtime, request.user.user_id, body)
        return created(schedule_response(row), schedule_path(row.serial_number, row.id))

    async def _page(
        self,
        request: Request[Caller, Any, Any],
        runtime: Runtime,
        serial_number: str | None,
        page: str | None,
        page_size: str | None,
    ) -> SchedulePage:
        paging = page_request(runtime.settings, page, page_size)
        user_id = request.user.user_id
        result = await service.list_schedules(runtime, user_id, paging, serial_number)
        path = "/schedules" if serial_number is None else f"/schedules/{serial_number}"
        return SchedulePage(
            embedded=EmbeddedSchedules(schedule=[schedule_body(r) for r in result.rows]),
            **page_members(runtime.settings, paging, result, path),
        )

    @get(
        "/",
        media_type=HAL_JSON,
        summary="The caller's schedules, paged",
        operation_class=ApiOperation,
        responses=problems(400, 401, 503),
    )
    async def list_schedules(
        self,
        request: Request[Caller, Any, Any],
        runtime: NamedDependency[Runtime],
        page: PageNumber = None,
        page_size: PageSize = None,
    ) -> SchedulePage:
        return await self._page(request, runtime, None, page, page_size)

    @get(
        "/{serial_number:str}",
        media_type=HAL_JSON,
        summary="The schedules of one of the caller's controllers, paged",
        operation_class=ApiOperation,
        responses=problems(400, 401, 404, 503),
    )
    async def list_controller_schedules(
        self,
        request: Request[Caller, Any, Any],
        runtime: NamedDependency[Runtime],
        serial_number: SerialNumber,
        page: PageNumber = None,
        page_size: PageSize = None,
    ) -> SchedulePage:
        return await self._page(request, runtime, serial_number, page, page_size)

    @get(
        "/{serial_number:str}/{schedule_id:str}",
        media_type=HAL_JSON,
        summary="One schedule",
        operation_class=ApiOperation,
        responses=problems(401, 404, 503, descriptions={404: _404}),
    )
    async def read_schedule(
        self,
        request: Request[Caller, Any, Any],
        runtime: NamedDependency[Runtime],
        serial_number: SerialNumber,
        schedule_id: ScheduleId,
    ) -> ScheduleResponse:
        user_id = request.user.user_id
        return schedule_response(
            await service.get_schedule(runtime, user_id, serial_number, schedule_id)
        )

    @patch(
        "/{serial_number:str}/{schedule_id:str}",
        media_type=HAL_JSON,
        summary="Change a schedule",
        operation_class=with_body(ApiOperation, ScheduleChange),
        responses=problems(400, 401, 404, 413, 415, 503, descriptions={404: _404}),
    )
    async def change_schedule(
        self,
        request: Request[Caller, Any, Any],
        runtime: NamedDependency[Runtime],
        serial_number: SerialNumber,
        schedule_id: ScheduleId,
    ) -> ScheduleResponse:
        user_id = request.user.user_id
        row = await service.get_schedule(runtime, user_id, serial_number, schedule_id)
        body = await read_json_object(request)  # after the 404
        return schedule_response(await service.update_schedule(runtime, row, body))

    @delete(
        "/{serial_number:str}/{schedule_id:str}",
        status_code=200,
        media_type=HAL_JSON,
        summary="Delete a schedule (the answer shows it as it was)",
        operation_class=ApiOperation,
        responses=problems(401, 404, 503, descriptions={404: _404}),
    )
    async def delete_schedule(
        self,
        request: Request[Caller, Any, Any],
        runtime: NamedDependency[Runtime],
        serial_number: SerialNumber,
        schedule_id: ScheduleId,
    ) -> ScheduleResponse:
        user_id = request.user.user_id
        row = await service.get_schedule(runtime, user_id, serial_number, schedule_id)
        await service.delete_schedule(runtime, row)
        return schedule_response(row)
