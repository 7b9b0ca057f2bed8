"""Who is looking: the session behind a request's cookie, and the cookie itself.

Every page but the log-in asks for ``viewer``: no live session sends the browser to the
log-in page; a state-changing request must also carry the app's proof (proof.py).
"""

from __future__ import annotations

from typing import Any

from litestar import Request
from litestar.datastructures import Cookie
from litestar.di import NamedDependency

from devicecontrol.auth.sessions import WebSession, cookie_name, find_session, session_secret
from devicecontrol.http.addresses import came_over_tls
from devicecontrol.runtime import Runtime
from devicecontrol.webapp.proof import (
    SAFE_METHODS,
    require_same_origin,
    require_session_proof,
)


class LoginNeeded(Exception):
    """No live session: the browser is sent to the log-in page."""


async def provide_viewer(
    request: Request[Any, Any, Any], runtime: NamedDependency[Runtime]
) -> WebSession:
    changes = request.method not in SAFE_METHODS
    if changes:  # another site's request is refused as such, with or without a cookie
        require_same_origin(request)
    session = await find_session(runtime, session_secret(request, runtime))
    if session is None:
        raise LoginNeeded()
    if changes:
        require_session_proof(request, session)
    return session


def session_cookie(
    request: Request[Any, Any, Any], runtime: Runtime, session: WebSession | None
) -> Cookie:
    """The session's cookie (or, with None, the one that deletes it): never readable by
    script, never sent cross-site, ``Secure`` and ``__Host-`` whenever the browser reached
    us over TLS (``auth/sessions.py``)."""
    secure = came_over_tls(request, runtime.settings.trusted_proxies)
    return Cookie(
        key=cookie_name(secure),
        value=session.secret if session else "",
        path="/",
        httponly=True,
        samesite="strict",
        secure=secure,
        max_age=runtime.settings.access_token_ttl if session else 0,
    )
