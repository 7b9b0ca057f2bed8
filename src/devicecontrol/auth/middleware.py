"""Every route needs a bearer token unless its handler opts out with ``exclude_from_auth``.

The opt-outs (``opt={"exclude_from_auth": True}`` on a handler, controller or router): the
token endpoints (AuthController), ``GET /openapi.json`` (openapi.py), the ``/docs``
router (app.py), ``GET /asyncapi.json`` (devices/asyncapi.py) and ``GET /healthz``,
``/readyz``, ``/metrics`` (observability/endpoints.py).
There are no path patterns: an opt-out is visible where the route is.
"""

from __future__ import annotations

from litestar.connection import ASGIConnection
from litestar.middleware import AbstractAuthenticationMiddleware, AuthenticationResult

from devicecontrol.auth.service import authenticate_bearer
from devicecontrol.runtime import Runtime


class BearerTokenMiddleware(AbstractAuthenticationMiddleware):
    async def authenticate_request(self, connection: ASGIConnection) -> AuthenticationResult:
        runtime: Runtime = connection.app.state.runtime
        # two Authorization headers are ambiguous (which one would a proxy have checked?):
        # joined, they never form a valid credential, so the request is 401
        authorization = ", ".join(connection.headers.getall("authorization", [])) or None
        caller = await authenticate_bearer(runtime, authorization)
        return AuthenticationResult(user=caller, auth=None)
