"""The geofence endpoints (contract §12): thin handlers over geofences/service.py."""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Controller, Request, Response, delete, get, patch, post
from litestar.di import NamedDependency
from litestar.params import PathParameter
from sqlalchemy import Row

from devicecontrol.auth.schemas import Caller
from devicecontrol.automations.geofences import service
from devicecontrol.automations.geofences.schemas import (
    CrossingResponse,
    EmbeddedGeofences,
    GeofenceBody,
    GeofenceChange,
    GeofencePage,
    GeofenceRequest,
    GeofenceResponse,
    LocationRequest,
)
from devicecontrol.devices.routes import command_body, command_path
from devicecontrol.http.bodies import read_json_object
from devicecontrol.http.hal import HAL_JSON, created, page_members, self_links
from devicecontrol.http.openapi import BEARER, ApiOperation, location, problems, with_body
from devicecontrol.http.paging import PageNumber, PageSize, page_request
from devicecontrol.runtime import Runtime

GeofenceId = Annotated[
    str,
    PathParameter(
        description="The geofence's `id`; anything else is an unknown geofence.",
        schema_extra={"pattern": "^[1-9][0-9]{0,9}$"},
    ),
]
_404 = "No such geofence among the caller's (unknown, another account's, or not an id)."
_CREATE_404 = "`controller_id` names no controller of the caller's."
_COMMAND_429 = "The controller has 100 unfinished commands; try again after `Retry-After` s."


def geofence_path(geofence_id: int) -> str:
    return f"/geofences/{geofence_id}"


def geofence_body(row: Row[Any]) -> GeofenceBody:
    return GeofenceBody(
        id=row.id,
        controller_id=row.serial_number,
        user_id=row.user_id,
        latitude=row.latitude,
        longitude=row.longitude,
        radius=row.radius,
        enter_command_name=row.enter_command_name,
        enter_command_fields=row.enter_command_fields,
        exit_command_name=row.exit_command_name,
        exit_command_fields=row.exit_command_fields,
        active=int(row.active),
        enter_push=int(row.enter_push),
        exit_push=int(row.exit_push),
        links=self_links(geofence_path(row.id)),
    )


def geofence_response(row: Row[Any]) -> GeofenceResponse:
    return GeofenceResponse(geofence=geofence_body(row), links=self_links(geofence_path(row.id)))


def crossing_response(
    geofence_id: str, serial_number: str, crossing: service.Crossing, *, status: int
) -> Response[CrossingResponse]:
    command = None if crossing.command is None else command_body(serial_number, crossing.command)
    content = CrossingResponse(
        inside=crossing.inside,
        command=command,
        links=self_links(geofence_path(int(geofence_id))),
    )
    if status != 201:
        return Response(content, status_code=status)
    return created(content, None if command is None else command_path(serial_number, command.id))


_FIRED_LOCATION = location(
    "The command's path (`/v1/controllers/<sn>/commands/<id>`), when one was made.",
    required=False,
)


class GeofencesController(Controller):
    """The caller's geofences, and the phone's reports that fire their commands."""

    path = "/geofences"
    tags = ["automation"]  # noqa: RUF012
    security = BEARER

    @get(
        "/",
        media_type=HAL_JSON,
        summary="The caller's geofences, paged",
        operation_class=ApiOperation,
        responses=problems(400, 401, 503),
    )
    async def list_geofences(
        self,
        request: Request[Caller, Any, Any],
        runtime: NamedDependency[Runtime],
        page: PageNumber = None,
        page_size: PageSize = None,
    ) -> GeofencePage:
        paging = page_request(runtime.settings, page, page_size)
        result = await service.list_geofences(runtime, request.user.user_id, paging)
        return GeofencePage(
            embedded=EmbeddedGeofences(geofence=[geofence_body(r) for r in result.rows]),
            **page_members(runtime.settings, paging, result, "/geofences"),
        )

    @post(
        "/",
        status_code=201,
        media_type=HAL_JSON,
        summary="Make a geofence",
        operation_class=with_body(ApiOperation, GeofenceRequest),
        response_headers=location("The new geofence's path (`/v1/geofences/<id>`)."),
        responses=problems(400, 401, 404, 413, 415, 503, descriptions={404: _CREATE_404}),
    )
    async def create_geofence(
        self, request: Request[Caller, Any, Any], runtime: NamedDependency[Runtime]
    ) -> Response[GeofenceResponse]:
        body = await read_json_object(request)
        row = await service.create_geofence(runtime, request.user.user_id, body)
        return created(geofence_response(row), geofence_path(row.id))

    @get(
        "/{geofence_id:str}",
        media_type=HAL_JSON,
        summary="One of the caller's geofences",
        operation_class=ApiOperation,
        responses=problems(401, 404, 503, descriptions={404: _404}),
    )
    async def read_geofence(
        self,
        request: Request[Caller, Any, Any],
        runtime: NamedDependency[Runtime],
        geofence_id: GeofenceId,
    ) -> GeofenceResponse:
        row = await service.get_geofence(runtime, request.user.user_id, geofence_id)
        return geofence_response(row)

    @patch(
        "/{geofence_id:str}",
        media_type=HAL_JSON,
        summary="Change a geofence",
        operation_class=with_body(ApiOperation, GeofenceChange),
        responses=problems(400, 401, 404, 413, 415, 503, descriptions={404: _404}),
    )
    async def change_geofence(
        self,
        request: Request[Caller, Any, Any],
        runtime: NamedDependency[Runtime],
        geofence_id: GeofenceId,
    ) -> GeofenceResponse:
        user_id = request.user.user_id
        row = await service.get_geofence(runtime, user_id, geofence_id)  # 404 before the body
        body = await read_json_object(request)
        return geofence_response(await service.update_geofence(runtime, row, body))

    @delete(
        "/{geofence_id:str}",
        status_code=200,
        media_type=HAL_JSON,
        summary="Delete a geofence (the answer shows it as it was)",
        operation_class=ApiOperation,
        responses=problems(401, 404, 503, descriptions={404: _404}),
    )
    async def delete_geofence(
        self,
        request: Request[Caller, Any, Any],
        runtime: NamedDependency[Runtime],
        geofence_id: GeofenceId,
    ) -> GeofenceResponse:
        row = await service.delete_geofence(runtime, request.user.user_id, geofence_id)
        return geofence_response(row)

    @post(
        "/{geofence_id:str}/location",
        status_code=200,
        media_type=HAL_JSON,
        summary="Report where the phone is; a crossing fires the enter or exit command",
        operation_class=with_body(ApiOperation, LocationRequest),
        responses=problems(
            400, 401, 404, 413, 415, 429, 503, descriptions={404: _404, 429: _COMMAND_429}
        ),
    )
    async def report_location(
        self,
        request: Request[Caller, Any, Any],
        runtime: NamedDependency[Runtime],
        geofence_id: GeofenceId,
    ) -> Response[CrossingResponse]:
        row = await service.get_geofence(runtime, request.user.user_id, geofence_id)
        body = await read_json_object(request)
        crossing = await service.report_location(runtime, row, body)
        return crossing_response(geofence_id, row.serial_number, crossing, status=200)

    async def _cross(
        self, request: Request[Caller, Any, Any], runtime: Runtime, geofence_id: str, entering: bool
    ) -> Response[CrossingResponse]:
        row = await service.get_geofence(runtime, request.user.user_id, geofence_id)
        crossing = await service.cross(runtime, row, entering=entering)
        return crossing_response(geofence_id, row.serial_number, crossing, status=201)

    @post(
        "/{geofence_id:str}/enter",
        status_code=201,
        media_type=HAL_JSON,
        summary="The phone entered: fire the enter command (none if inactive)",
        operation_class=ApiOperation,
        response_headers=_FIRED_LOCATION,
        responses=problems(401, 404, 429, 503, descriptions={404: _404, 429: _COMMAND_429}),
    )
    async def enter(
        self,
        request: Request[Caller, Any, Any],
        runtime: NamedDependency[Runtime],
        geofence_id: GeofenceId,
    ) -> Response[CrossingResponse]:
        return await self._cross(request, runtime, geofence_id, True)

    @post(
        "/{geofence_id:str}/exit",
        status_code=201,
        media_type=HAL_JSON,
        summary="The phone left: fire the exit command (none if inactive)",
        operation_class=ApiOperation,
        response_headers=_FIRED_LOCATION,
        responses=problems(401, 404, 429, 503, descriptions={404: _404, 429: _COMMAND_429}),
    )
    async def exit(
        self,
        request: Request[Caller, Any, Any],
        runtime: NamedDependency[Runtime],
        geofence_id: GeofenceId,
    ) -> Response[CrossingResponse]:
        return await self._cross(request, runtime, geofence_id, False)
