"""Bodies of the token endpoints."""

from __future__ import annotations

import msgspec

from devicecontrol.hal import SelfLinks


class AuthTokens(msgspec.Struct, frozen=True):
    access_token: str
    expires_in: int
    token_type: str = "Bearer"
    scope: None = None
    refresh_token: str | msgspec.UnsetType = msgspec.UNSET  # login only


class TokenResponse(msgspec.Struct, frozen=True):
    auth: AuthTokens
    links: SelfLinks = msgspec.field(name="_links")


class RevokeResponse(msgspec.Struct, frozen=True):
    """RFC 7009's empty success, in the HAL envelope every response has."""

    links: SelfLinks = msgspec.field(name="_links")


class Caller(msgspec.Struct, frozen=True):
    """The authenticated user behind a request's bearer token."""

    user_id: int
