"""Every route needs a bearer token unless its handler opts out with ``exclude_from_auth``.

The opt-outs (``opt={"exclude_from_auth": True}`` on a handler, controller or router): the
token endpoints (AuthController), ``GET /openapi.json`` (openapi.py), the ``/docs``
router (app.py), ``GET /asyncapi.json`` (devices/asyncapi.py) and ``GET /healthz``,
``/readyz``, ``/metrics`` (observability/endpoints.py).
There are no path patterns: an opt-out is visible where the route is.

A handler with ``opt={SESSION_COOKIE: True}`` (the live event streams, which a browser's
EventSource opens with the web app's session cookie and no header) also takes that cookie
when no ``Authorization`` header came.
"""

from __future__ import annotations

from litestar.connection import ASGIConnection
from litestar.middleware import AbstractAuthenticationMiddleware, AuthenticationResult

from devicecontrol.auth.schemas import Caller
from devicecontrol.auth.service import authenticate_bearer
from devicecontrol.auth.sessions import find_session, session_secret
from devicecontrol.runtime import Runtime

SESSION_COOKIE = "session_cookie"  # a handler's opt: the web app's session cookie will do


class BearerTokenMiddleware(AbstractAuthenticationMiddleware):
    async def authenticate_request(self, connection: ASGIConnection) -> AuthenticationResult:
        runtime: Runtime = connection.app.state.runtime
        # two Authorization headers are ambiguous (which one would a proxy have checked?):
        # joined, they never form a valid credential, so the request is 401
        authorization = ", ".join(connection.headers.getall("authorization", [])) or None
        if authorization is None and connection.route_handler.opt.get(SESSION_COOKIE):
            session = await find_session(runtime, session_secret(connection, runtime))
            if session is not None:
                return AuthenticationResult(user=Caller(user_id=session.user_id), auth=session)
        caller = await authenticate_bearer(runtime, authorization)
        return AuthenticationResult(user=caller, auth=None)
