"""What the app shows when a request fails: the API's own error, in words, as a page (or,
for an htmx request, as a message in the page); never a blank page, never problem+json."""

from __future__ import annotations

import logging
from typing import Any

from litestar import MediaType, Request, Response
from litestar.exceptions import HTTPException
from litestar.response import Redirect, Template
from litestar.types import ExceptionHandlersMap

from devicecontrol.errors import DomainError, TooManyRequests, is_database_outage
from devicecontrol.webapp.viewer import LoginNeeded
from devicecontrol.webapp.wording import words

LOGIN_PATH = "/app/login"
log = logging.getLogger("devicecontrol.webapp")


def is_htmx(request: Request[Any, Any, Any]) -> bool:
    return request.headers.get("hx-request") == "true"


def shown_failure(
    request: Request[Any, Any, Any],
    status: int,
    message: str,
    headers: dict[str, str] | None = None,
) -> Response[Any]:
    """The message as an alert in the page (htmx swaps it in), or as a page of its own."""
    template = "_message.html" if is_htmx(request) else "failure.html"
    return Template(
        template_name=template,
        context={"message": message, "alert": True, "session": None},
        media_type=MediaType.HTML,
        status_code=status,
        headers=headers,
    )


def _login_needed(request: Request[Any, Any, Any], _: LoginNeeded) -> Response[Any]:
    if is_htmx(request):  # htmx follows this header with a full page load
        return Response(b"", status_code=200, headers={"HX-Redirect": LOGIN_PATH})
    return Redirect(LOGIN_PATH, status_code=303)


def _domain_error(request: Request[Any, Any, Any], exc: DomainError) -> Response[Any]:
    message = exc.detail
    if isinstance(exc, TooManyRequests):
        message = words("error.too_many", seconds=exc.headers.get("Retry-After", "60"))
    return shown_failure(request, exc.status, message, exc.headers)


def _http_error(request: Request[Any, Any, Any], exc: HTTPException) -> Response[Any]:
    if exc.status_code == 404:
        return shown_failure(request, 404, words("error.not_found"))
    if exc.status_code >= 500:
        log.error("internal HTTP error %s", exc.status_code, exc_info=exc)
        return shown_failure(request, 500, words("error.unexpected"))
    return shown_failure(request, exc.status_code, str(exc.detail))


def _unexpected(request: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
    if is_database_outage(exc):
        log.warning("database unavailable: %s", type(exc).__name__)
        return shown_failure(request, 503, words("error.outage"), {"Retry-After": "5"})
    log.error("unhandled error", exc_info=exc)
    return shown_failure(request, 500, words("error.unexpected"))


FAILURE_HANDLERS: ExceptionHandlersMap = {
    LoginNeeded: _login_needed,
    DomainError: _domain_error,
    HTTPException: _http_error,
    Exception: _unexpected,
}
