"""Every route needs a bearer token unless its handler opts out with ``exclude_from_auth``."""

from __future__ import annotations

from litestar.connection import ASGIConnection
from litestar.middleware import AbstractAuthenticationMiddleware, AuthenticationResult

from devicecontrol.auth.service import authenticate_bearer
from devicecontrol.runtime import Runtime


class BearerTokenMiddleware(AbstractAuthenticationMiddleware):
    async def authenticate_request(self, connection: ASGIConnection) -> AuthenticationResult:
        runtime: Runtime = connection.app.state.runtime
        caller = await authenticate_bearer(runtime, connection.headers.get("authorization"))
        return AuthenticationResult(user=caller, auth=None)
