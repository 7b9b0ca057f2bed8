"""The device endpoints (contract §10): the original API's /provider pair, and the native
commands and readings of a controller. Thin handlers over devices/service.py."""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import urlencode

from litestar import Controller, Request, Response, get, post
from litestar.di import NamedDependency
from litestar.params import PathParameter, QueryParameter
from sqlalchemy import Row

from devicecontrol.auth.schemas import Caller
from devicecontrol.clock import TIMESTAMP_PATTERN, format_timestamp
from devicecontrol.controllers.schemas import SerialNumber
from devicecontrol.devices import service
from devicecontrol.devices.commands import service as commands
from devicecontrol.devices.readings import export, summary
from devicecontrol.devices.readings import service as readings
from devicecontrol.devices.schemas import (
    CommandBody,
    CommandPage,
    CommandRequest,
    CommandResponse,
    EmbeddedCommands,
    EmbeddedReadings,
    ProviderCommand,
    ProviderFetchRequest,
    ProviderFetchResponse,
    ProviderSendRequest,
    ProviderSendResponse,
    ReadingPage,
    ReadingsSummary,
    ReadingsSummaryResponse,
)
from devicecontrol.errors import InvalidField
from devicecontrol.http.bodies import read_json_object
from devicecontrol.http.downloads import Download
from devicecontrol.http.hal import HAL_JSON, controller_path, created, page_members, self_links
from devicecontrol.http.openapi import BEARER, ApiOperation, CsvToo, location, problems, with_body
from devicecontrol.http.paging import PageNumber, PageSize
from devicecontrol.runtime import Runtime

CSV = "text/csv"

# the text as sent, checked by devices/service.py; documented as what it accepts
Wait = Annotated[
    str | None,
    QueryParameter(
        description="Hold the answer until the command is finished, or this many seconds.",
        schema_extra={
            "one_of": None,
            "type": "integer",
            "minimum": 0,
            "maximum": service.MAX_WAIT_S,
        },
    ),
]


def _moment(bound: str) -> QueryParameter:
    return QueryParameter(
        description=f"Readings that arrived {bound} (UTC, `YYYY-MM-DD HH:MM:SS`).",
        schema_extra={"one_of": None, "type": "string", "pattern": TIMESTAMP_PATTERN},
    )


Since = Annotated[str | None, _moment("at or after this time")]
Every = Annotated[
    str | None,
    QueryParameter(
        description="The buckets' width; by default the finest that gives at most "
        f"{summary.MAX_BUCKETS} buckets over the range. `1d` is the owner's local day.",
        schema_extra={"one_of": None, "type": "string", "enum": list(summary.EVERY)},
    ),
]
OutputFormat = Annotated[
    str | None,
    QueryParameter(
        name="format",
        description="`csv`: the readings as CSV, as `Accept: text/csv` asks (`json`, the "
        "default: the HAL page).",
        schema_extra={"one_of": None, "type": "string", "enum": ["json", "csv"]},
    ),
]


FORMATS = ("json", "csv")


def wants_csv(request: Request[Any, Any, Any], output: str | None) -> bool:
    """``format`` decides when given (checked already); otherwise whether ``Accept``
    prefers CSV."""
    if output is not None:
        return output == "csv"
    best = request.accept.best_match([HAL_JSON, "application/json", CSV], default=HAL_JSON)
    return best == CSV


Until = Annotated[str | None, _moment("before this time")]
CommandId = Annotated[
    str,
    PathParameter(
        description="The command's `id`; anything else is an unknown command.",
        schema_extra={"pattern": f"^{service.COMMAND_ID.pattern}$"},
    ),
]
_COMMAND_429 = "The controller has 100 unfinished commands; try again after `Retry-After` s."
_COMMAND_404 = (
    "No such controller among the caller's (unknown, another account's, or a serial number "
    "that is not well-formed), or no such command of the current ownership."
)


async def provider_fetch_response(
    runtime: Runtime, user_id: int, body: dict[str, Any]
) -> ProviderFetchResponse:
    """``POST /provider/fetch`` as HAL. Shared by the handler and ``hot_reads.py``."""
    state = await service.provider_fetch(runtime, user_id, body)
    return ProviderFetchResponse(provider=state, links=self_links("/provider/fetch"))


def command_path(serial_number: str, command_id: str) -> str:
    return f"{controller_path(serial_number)}/commands/{command_id}"


def command_body(serial_number: str, command: Row[Any]) -> CommandBody:
    shown = commands.shown(command)
    return CommandBody(
        id=shown["id"],
        name=shown["name"],
        params=shown["params"],
        status=shown["status"],
        created=format_timestamp(shown["created"]) or "",
        sent_at=format_timestamp(shown["sent_at"]),
        completed_at=format_timestamp(shown["completed_at"]),
        expires_at=format_timestamp(shown["expires_at"]) or "",
        result=shown["result"],
        error=shown["error"],
        links=self_links(command_path(serial_number, shown["id"])),
    )


class ProviderController(Controller):
    """The original API's device endpoints, as its clients (Home Assistant) call them."""

    path = "/provider"
    tags = ["devices"]  # noqa: RUF012
    security = BEARER

    @post(
        "/send",
        status_code=200,
        media_type=HAL_JSON,
        summary="Send a command (the original API's form)",
        operation_class=with_body(ApiOperation, ProviderSendRequest),
        responses=problems(400, 401, 404, 413, 415, 429, 503, descriptions={429: _COMMAND_429}),
    )
    async def send(
        self, request: Request[Caller, Any, Any], runtime: NamedDependency[Runtime]
    ) -> ProviderSendResponse:
        body = await read_json_object(request)
        command = await service.provider_send(runtime, request.user.user_id, body)
        shown = commands.shown(command)
        return ProviderSendResponse(
            provider=ProviderCommand(
                id=shown["id"],
                status=shown["status"],
                command_name=shown["name"],
                command_params=shown["params"],
                device_id=body["serial_number"],
                created_at=format_timestamp(shown["created"]) or "",
            ),
            links=self_links("/provider/send"),
        )

    @post(
        "/fetch",
        status_code=200,
        media_type=HAL_JSON,
        summary="The latest reading and whether the device is online",
        operation_class=with_body(ApiOperation, ProviderFetchRequest),
        responses=problems(400, 401, 404, 413, 415, 503),
    )
    async def fetch(
        self, request: Request[Caller, Any, Any], runtime: NamedDependency[Runtime]
    ) -> ProviderFetchResponse:
        body = await read_json_object(request)
        return await provider_fetch_response(runtime, request.user.user_id, body)


class DevicesController(Controller):
    """A controller's commands and readings (beyond the original API)."""

    path = "/controllers/{serial_number:str}"
    tags = ["devices"]  # noqa: RUF012
    security = BEARER

    @post(
        "/commands",
        status_code=201,
        media_type=HAL_JSON,
        summary="Send a command",
        operation_class=with_body(ApiOperation, CommandRequest),
        response_headers=location("The new command's path (`/v1/controllers/<sn>/commands/<id>`)."),
        responses=problems(400, 401, 404, 413, 415, 429, 503, descriptions={429: _COMMAND_429}),
    )
    async def create_command(
        self,
        request: Request[Caller, Any, Any],
        runtime: NamedDependency[Runtime],
        serial_number: SerialNumber,
        wait: Wait = None,
    ) -> Response[CommandResponse]:
        # ownership first: someone else's controller is 404 whatever the body holds
        device = await service.device_of(runtime, request.user.user_id, serial_number)
        body = await read_json_object(request)
        command = await service.create_command(runtime, device, body, wait=wait)
        shown = command_body(serial_number, command)
        return created(
            CommandResponse(command=shown, links=shown.links),
            command_path(serial_number, shown.id),
        )

    @get(
        "/commands",
        media_type=HAL_JSON,
        summary="The controller's commands, newest first, paged",
        operation_class=ApiOperation,
        responses=problems(400, 401, 404, 503),
    )
    async def list_commands(
        self,
        request: Request[Caller, Any, Any],
        runtime: NamedDependency[Runtime],
        serial_number: SerialNumber,
        page: PageNumber = None,
        page_size: PageSize = None,
    ) -> CommandPage:
        result, paging = await service.commands_page(
            runtime, request.user.user_id, serial_number, page=page, page_size=page_size
        )
        path = controller_path(serial_number) + "/commands"
        return CommandPage(
            embedded=EmbeddedCommands(
                command=[command_body(serial_number, row) for row in result.rows]
            ),
            **page_members(runtime.settings, paging, result, path),
        )

    @get(
        "/commands/{command_id:str}",
        media_type=HAL_JSON,
        summary="One command of the controller",
        operation_class=ApiOperation,
        responses=problems(401, 404, 503, descriptions={404: _COMMAND_404}),
    )
    async def read_command(
        self,
        request: Request[Caller, Any, Any],
        runtime: NamedDependency[Runtime],
        serial_number: SerialNumber,
        command_id: CommandId,
    ) -> CommandResponse:
        command = await service.command_of(runtime, request.user.user_id, serial_number, command_id)
        shown = command_body(serial_number, command)
        return CommandResponse(command=shown, links=shown.links)

    @get(
        "/readings",
        media_type=HAL_JSON,
        summary="The controller's readings, newest first, paged; or all of them as CSV",
        description="With `Accept: text/csv` or `format=csv`: every reading within "
        "`since`/`until`, oldest first, as CSV (`created`, then every field the readings "
        "have, in name order), streamed, not paged.",
        operation_class=CsvToo,
        responses=problems(400, 401, 404, 503),
    )
    async def list_readings(
        self,
        request: Request[Caller, Any, Any],
        runtime: NamedDependency[Runtime],
        serial_number: SerialNumber,
        since: Since = None,
        until: Until = None,
        page: PageNumber = None,
        page_size: PageSize = None,
        output: OutputFormat = None,
    ) -> ReadingPage:
        if output is not None and output not in FORMATS:
            await commands.owned_device(runtime, request.user.user_id, serial_number)  # 404 first
            raise InvalidField("format", "must be json or csv")
        if wants_csv(request, output):
            lines = await service.readings_csv(
                runtime, request.user.user_id, serial_number, since=since, until=until
            )
            return Download(  # type: ignore[return-value]  # Litestar sends a Response as it is
                lines,
                media_type=export.MEDIA_TYPE,
                headers={
                    "Content-Disposition": f'attachment; filename="{serial_number}-readings.csv"',
                    "Cache-Control": "no-store",
                },
            )
        result, paging = await service.readings_page(
            runtime,
            request.user.user_id,
            serial_number,
            since=since,
            until=until,
            page=page,
            page_size=page_size,
        )
        path = controller_path(serial_number) + "/readings"
        return ReadingPage(
            embedded=EmbeddedReadings(
                reading=[readings.shown_reading(row.payload, row.created_at) for row in result.rows]
            ),
            **page_members(
                runtime.settings, paging, result, path, {"since": since, "until": until}
            ),
        )

    @get(
        "/readings/summary",
        media_type=HAL_JSON,
        summary="The controller's readings summarized: per bucket, each field's min, max, avg",
        operation_class=ApiOperation,
        responses=problems(400, 401, 404, 503),
    )
    async def summarize_readings(
        self,
        request: Request[Caller, Any, Any],
        runtime: NamedDependency[Runtime],
        serial_number: SerialNumber,
        since: Since = None,
        until: Until = None,
        every: Every = None,
    ) -> ReadingsSummaryResponse:
        plan, buckets = await service.readings_summary(
            runtime, request.user.user_id, serial_number, since=since, until=until, every=every
        )
        shown = ReadingsSummary(
            serial_number=serial_number,
            every=plan.every,
            time_zone=plan.zone.key,
            since=format_timestamp(plan.since) or "",
            until=format_timestamp(plan.until) or "",
            buckets=buckets,
        )
        query = {"since": shown.since, "until": shown.until, "every": shown.every}
        path = f"{controller_path(serial_number)}/readings/summary?{urlencode(query)}"
        return ReadingsSummaryResponse(summary=shown, links=self_links(path))
