"""GET /users/me, basic or advanced (``Accept-Response: Advanced``)."""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Controller, Request, get
from litestar.di import NamedDependency
from litestar.params import HeaderParameter

from devicecontrol.auth.schemas import Caller
from devicecontrol.hal import HAL_JSON, Link, api_path
from devicecontrol.openapi import BEARER, ApiOperation, problems
from devicecontrol.runtime import Runtime
from devicecontrol.users import service
from devicecontrol.users.schemas import UserLinks, UserResponse


class UsersController(Controller):
    path = "/users"
    tags = ["users"]  # noqa: RUF012
    security = BEARER

    @get(
        "/me",
        media_type=HAL_JSON,
        summary="The caller's profile",
        operation_class=ApiOperation,
        responses=problems(401, 503),
    )
    async def me(
        self,
        request: Request[Caller, Any, Any],
        runtime: NamedDependency[Runtime],
        accept_response: Annotated[
            str | None,
            HeaderParameter(
                name="Accept-Response",
                description="`Advanced` adds the country record under `_relation`.",
                schema_extra={"one_of": None, "type": "string"},  # a header is never null
            ),
        ] = None,
    ) -> UserResponse:
        advanced = (accept_response or "").strip().lower() == "advanced"
        profile = await service.get_profile(runtime, request.user.user_id, advanced=advanced)
        return UserResponse(
            users=profile,
            links=UserLinks(
                self=Link(api_path("/users/me")),
                controller=Link(api_path("/controllers/{serial_number}"), templated=True),
            ),
        )
