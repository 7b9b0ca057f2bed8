"""POST /auth/login and /auth/renew: JSON or form bodies, RFC 6749 errors, no caching."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import unquote

import msgspec
from litestar import Controller, Request, Response, post
from litestar.datastructures import ResponseHeader
from litestar.di import NamedDependency

from devicecontrol.auth import service
from devicecontrol.auth.schemas import (
    AuthTokens,
    ClientRequest,
    LoginRequest,
    RenewRequest,
    RevokeRequest,
    RevokeResponse,
    TokenResponse,
)
from devicecontrol.errors import BadRequest, OAuthError
from devicecontrol.http.addresses import client_address
from devicecontrol.http.bodies import read_json_object
from devicecontrol.http.fields import decode_body
from devicecontrol.http.hal import HAL_JSON, self_links
from devicecontrol.http.openapi import CLIENT_CREDENTIALS, TokenOperation, problems, with_body
from devicecontrol.http.problems import EXCEPTION_HANDLERS
from devicecontrol.runtime import Runtime

NO_STORE = [
    ResponseHeader(name="Cache-Control", value="no-store"),
    ResponseHeader(name="Pragma", value="no-cache"),
]
ErrorHandler = Callable[[Request[Any, Any, Any], Any], Response[bytes]]
Sent = TypeVar("Sent", bound=ClientRequest)


def _not_stored(handler: ErrorHandler) -> ErrorHandler:
    """The app's error handler, plus the no-store headers every token response carries."""

    def handle(request: Request[Any, Any, Any], exc: Any) -> Response[bytes]:
        response = handler(request, exc)
        response.headers.update({header.name: header.value for header in NO_STORE})
        return response

    return handle


def _basic_client_credentials(request: Request[Any, Any, Any]) -> dict[str, str]:
    """RFC 6749 §2.3.1 client authentication by HTTP Basic, as an alternative to the body."""
    scheme, _, encoded = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "basic":
        return {}
    try:
        client_id, sep, secret = (
            base64.b64decode(encoded.strip(), validate=True).decode().partition(":")
        )
    except (binascii.Error, UnicodeDecodeError):
        raise OAuthError("invalid_client", "Malformed HTTP Basic client credentials.") from None
    if not sep:
        raise OAuthError("invalid_client", "Malformed HTTP Basic client credentials.")
    return {"client_id": unquote(client_id), "client_secret": unquote(secret)}


async def _token_request(request: Request[Any, Any, Any], struct: type[Sent]) -> Sent:
    """The body (JSON or form, HTTP Basic winning for the client's fields) as ``struct``;
    a refused field is the OAuth ``invalid_request``."""
    try:
        body = {
            **await read_json_object(request, allow_form=True),
            **_basic_client_credentials(request),
        }
        return decode_body(body, struct)
    except BadRequest as exc:
        raise OAuthError("invalid_request", exc.detail, errors=exc.errors) from None


def _credentials(body: ClientRequest) -> service.ClientCredentials:
    return service.ClientCredentials(body.client_id, body.client_secret)


def _token_response(issued: service.IssuedTokens, path: str) -> TokenResponse:
    auth = AuthTokens(
        access_token=issued.access_token,
        expires_in=issued.expires_in,
        refresh_token=msgspec.UNSET if issued.refresh_token is None else issued.refresh_token,
    )
    return TokenResponse(auth=auth, links=self_links(path))


class AuthController(Controller):
    path = "/auth"
    tags = ["auth"]  # noqa: RUF012
    opt = {"exclude_from_auth": True}  # noqa: RUF012
    security = CLIENT_CREDENTIALS
    response_headers = NO_STORE
    # every error of these endpoints (415, 413, 503 as well as the OAuth ones) is no-store
    exception_handlers = {  # noqa: RUF012
        exc_type: _not_stored(handler) for exc_type, handler in EXCEPTION_HANDLERS.items()
    }

    @post(
        "/login",
        status_code=200,
        media_type=HAL_JSON,
        summary="Log in (password grant)",
        operation_class=with_body(TokenOperation, LoginRequest),
        responses=problems(400, 401, 413, 415, 429, 503, oauth=True),
    )
    async def login(
        self, request: Request[Any, Any, Any], runtime: NamedDependency[Runtime]
    ) -> TokenResponse:
        body = await _token_request(request, LoginRequest)
        issued = await service.login(
            runtime,
            _credentials(body),
            username=body.username,
            password=body.password,
            client_address=client_address(request, runtime.settings.trusted_proxies),
        )
        return _token_response(issued, "/auth/login")

    @post(
        "/renew",
        status_code=200,
        media_type=HAL_JSON,
        summary="Renew the access token",
        operation_class=with_body(TokenOperation, RenewRequest),
        responses=problems(400, 401, 413, 415, 429, 503, oauth=True),
    )
    async def renew(
        self, request: Request[Any, Any, Any], runtime: NamedDependency[Runtime]
    ) -> TokenResponse:
        body = await _token_request(request, RenewRequest)
        issued = await service.renew(
            runtime,
            _credentials(body),
            refresh_token=body.refresh_token,
            client_address=client_address(request, runtime.settings.trusted_proxies),
        )
        return _token_response(issued, "/auth/renew")

    @post(
        "/revoke",
        status_code=200,
        media_type=HAL_JSON,
        summary="Revoke a token (RFC 7009)",
        operation_class=with_body(TokenOperation, RevokeRequest),
        responses=problems(400, 401, 413, 415, 429, 503, oauth=True),
    )
    async def revoke(
        self, request: Request[Any, Any, Any], runtime: NamedDependency[Runtime]
    ) -> RevokeResponse:
        body = await _token_request(request, RevokeRequest)
        await service.revoke(
            runtime,
            _credentials(body),
            token=body.token,
            client_address=client_address(request, runtime.settings.trusted_proxies),
        )
        return RevokeResponse(links=self_links("/auth/revoke"))
