"""Bodies of the token endpoints."""

from __future__ import annotations

import msgspec

from devicecontrol.http.hal import SelfLinks
from devicecontrol.http.openapi import OptionalField, RequiredField


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


# Request bodies, as documented in the OpenAPI document. The handlers read the body
# themselves (JSON or form, bodies.read_json_object) and check these fields with
# bodies.string_field_errors; client_id and client_secret may come as HTTP Basic instead.


class LoginRequest(msgspec.Struct, frozen=True):
    """Resource-owner password grant. Other fields (such as grant_type) are ignored."""

    client_id: RequiredField
    client_secret: RequiredField
    username: RequiredField
    password: RequiredField


class RenewRequest(msgspec.Struct, frozen=True):
    """A new access token from a refresh token (which is not rotated)."""

    client_id: RequiredField
    client_secret: RequiredField
    refresh_token: RequiredField


class RevokeRequest(msgspec.Struct, frozen=True):
    """RFC 7009: revoke an access or refresh token of this client."""

    client_id: RequiredField
    client_secret: RequiredField
    token: RequiredField
    token_type_hint: OptionalField = None
