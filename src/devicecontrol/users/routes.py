"""GET /users/me, basic or advanced (``Accept-Response: Advanced``)."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from litestar import Controller, Request, get
from litestar.di import NamedDependency
from litestar.params import HeaderParameter
from sqlalchemy import Row

from devicecontrol.auth.schemas import Caller
from devicecontrol.clock import format_timestamp
from devicecontrol.http.hal import HAL_JSON, Link, api_path
from devicecontrol.http.openapi import BEARER, ApiOperation, problems
from devicecontrol.runtime import Runtime
from devicecontrol.users import service
from devicecontrol.users.schemas import (
    CountryRecord,
    UserLinks,
    UserProfile,
    UserRelations,
    UserResponse,
)


def country_record(row: Row) -> CountryRecord | None:
    """The profile row's country record, or None for an account without one."""
    if row.country_id is None:
        return None
    return CountryRecord(
        id=row.country_id,
        geoname_id=row.geoname_id,
        continent_code=row.continent_code,
        continent_name=row.continent_name,
        country_code=row.country_code,
        country_name=row.country_name,
        city_name=row.city_name,
        time_zone=row.time_zone,
    )


def user_profile(row: Row, *, advanced: bool) -> UserProfile:
    """The basic form; the advanced one adds the country record under ``_relation``."""
    profile = UserProfile(
        user_id=row.user_id,
        username=row.username,
        firstname=row.firstname,
        lastname=row.lastname,
        phone=row.phone,
        country_id=row.country_id,
        created=format_timestamp(row.created_at) or "",
    )
    if not advanced:
        return profile
    return msgspec.structs.replace(profile, relation=UserRelations(country=country_record(row)))


async def profile_response(
    runtime: Runtime, user_id: int, accept_response: str | None
) -> UserResponse:
    """``GET /users/me`` as HAL. Shared by the handler below and ``hot_reads.py``."""
    advanced = (accept_response or "").strip().lower() == "advanced"
    row = await service.get_profile(runtime, user_id)
    return UserResponse(
        users=user_profile(row, advanced=advanced),
        links=UserLinks(
            self=Link(api_path("/users/me")),
            controller=Link(api_path("/controllers/{serial_number}"), templated=True),
        ),
    )


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
        return await profile_response(runtime, request.user.user_id, accept_response)
