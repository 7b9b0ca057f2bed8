"""Proof that a state-changing request came from the app's own page, never the cookie
alone: the session's CSRF token in a header (htmx sends it from ``hx-headers``), which a
page of another origin can neither read nor send without a CORS preflight we never grant;
and, when the browser names the request's origin, that origin must be ours."""

from __future__ import annotations

import hmac
from typing import Any
from urllib.parse import urlsplit

from litestar.connection import ASGIConnection

from devicecontrol.auth.sessions import WebSession
from devicecontrol.errors import Forbidden
from devicecontrol.webapp.wording import words

CSRF_HEADER = "x-csrf-token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


class ForeignRequest(Forbidden):
    """A state-changing request without the app's proof: a cross-site form, a forged one."""

    def __init__(self) -> None:
        super().__init__(words("error.refused"))


def _same_origin(connection: ASGIConnection[Any, Any, Any, Any]) -> bool:
    """False when the browser says the request came from another site or origin."""
    if connection.headers.get("sec-fetch-site", "same-origin") not in ("same-origin", "none"):
        return False
    origin = connection.headers.get("origin")
    if origin is None:
        return True  # not every client names it; the header proof still has to hold
    # host names, not ports: deploy/'s nginx passes on ``Host`` without the port the
    # browser used (the token, bound to the session, still has to match)
    ours = urlsplit("//" + connection.headers.get("host", "")).hostname
    return origin != "null" and ours is not None and urlsplit(origin).hostname == ours


def require_same_origin(connection: ASGIConnection[Any, Any, Any, Any]) -> None:
    if not _same_origin(connection):
        raise ForeignRequest()


def require_login_proof(connection: ASGIConnection[Any, Any, Any, Any]) -> None:
    """The log-in form has no session to bind a token to: it must come from our origin, as
    an htmx request (a header no cross-site form can add)."""
    if connection.headers.get("hx-request") != "true" or not _same_origin(connection):
        raise ForeignRequest()


def require_session_proof(
    connection: ASGIConnection[Any, Any, Any, Any], session: WebSession
) -> None:
    """A state-changing request of a session: its CSRF token, from our origin."""
    sent = connection.headers.getall(CSRF_HEADER, [])
    if len(sent) != 1 or not _same_origin(connection):
        raise ForeignRequest()
    if not hmac.compare_digest(sent[0].encode(), session.csrf_token.encode()):
        raise ForeignRequest()
