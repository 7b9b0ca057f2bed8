"""Bodies of the token endpoints."""

from __future__ import annotations

import msgspec

from devicecontrol.http.fields import OptionalField, RequiredField
from devicecontrol.http.hal import SelfLinks


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


# Request bodies: the OpenAPI document shows them, and the handlers decode the body into
# them (JSON or form, bodies.read_json_object, then fields.decode_body); client_id and
# client_secret may come as HTTP Basic instead. Other fields (such as grant_type) are
# ignored.


class ClientRequest(msgspec.Struct, frozen=True):
    """What every token request carries: the client's credentials."""

    client_id: RequiredField
    client_secret: RequiredField


class LoginRequest(ClientRequest, frozen=True):
    """Resource-owner password grant. Other fields (such as grant_type) are ignored."""

    username: RequiredField
    password: RequiredField


class RenewRequest(ClientRequest, frozen=True):
    """A new access token from a refresh token (which is not rotated)."""

    refresh_token: RequiredField


class RevokeRequest(ClientRequest, frozen=True):
    """RFC 7009: revoke an access or refresh token of this client."""

    token: RequiredField
    token_type_hint: OptionalField = None
