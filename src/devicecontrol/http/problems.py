"""The one mapping of errors to RFC 9457 problem+json responses.

``EXCEPTION_HANDLERS`` turns the domain errors (``errors.py``), Litestar's own HTTP errors
and database outages into problem bodies. Anything else is a 500 with a generic body and
its traceback in the log. Nothing a client sends may produce a stack trace or SQL text in a
body.
"""

from __future__ import annotations

import logging
from http import HTTPStatus
from typing import Any

import msgspec
from litestar import Request, Response
from litestar.exceptions import HTTPException, ValidationException
from litestar.types import ExceptionHandlersMap
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError

from devicecontrol.errors import PROBLEM_MEDIA_TYPE, DomainError, is_database_outage

DATABASE_RETRY_AFTER_S = 5
log = logging.getLogger("devicecontrol.errors")


def problem_response(
    status: int,
    detail: str,
    *,
    title: str | None = None,
    headers: dict[str, str] | None = None,
    extra: dict[str, Any] | None = None,
) -> Response[bytes]:
    body = {
        "type": "about:blank",
        "title": title or HTTPStatus(status).phrase,
        "status": status,
        "detail": detail,
        **(extra or {}),
    }
    return Response(
        content=msgspec.json.encode(body),
        status_code=status,
        media_type=PROBLEM_MEDIA_TYPE,
        headers=headers,
    )


def _domain_error(_: Request[Any, Any, Any], exc: DomainError) -> Response[bytes]:
    return problem_response(
        exc.status, exc.detail, title=exc.title, headers=exc.headers, extra=exc.extra_members()
    )


def _validation_error(_: Request[Any, Any, Any], exc: ValidationException) -> Response[bytes]:
    errors = [
        {"field": str(item.get("key", "")), "message": str(item.get("message", "invalid"))}
        for item in (exc.extra if isinstance(exc.extra, list) else [])
        if isinstance(item, dict)
    ]
    detail = "; ".join(f"{e['field']}: {e['message']}" for e in errors) or "Invalid request."
    return problem_response(400, detail, extra={"errors": errors} if errors else None)


_HTTP_DETAILS = {
    404: "No such resource.",
    405: "This method is not allowed on this resource.",
    413: "The request body is larger than 64 KiB.",
}


def _http_error(_: Request[Any, Any, Any], exc: HTTPException) -> Response[bytes]:
    status = exc.status_code
    if status >= 500:
        log.error("internal HTTP error %s", status, exc_info=exc)
        return problem_response(500, "The server could not answer this request.")
    detail = _HTTP_DETAILS.get(status) or HTTPStatus(status).phrase + "."
    return problem_response(status, detail, headers=dict(exc.headers or {}))


def _database_unavailable(request: Request[Any, Any, Any], exc: Exception) -> Response[bytes]:
    """Outages are 503; a query bug, or any other error of the database layer, stays 500."""
    if not is_database_outage(exc):
        return _internal_error(request, exc)
    cause = getattr(exc, "orig", None)
    name = type(exc).__name__ if cause is None else f"{type(exc).__name__} ({type(cause).__name__})"
    log.warning("database unavailable: %s", name)
    return problem_response(
        503,
        "The database is unavailable; try again shortly.",
        headers={"Retry-After": str(DATABASE_RETRY_AFTER_S)},
    )


def _internal_error(_: Request[Any, Any, Any], exc: Exception) -> Response[bytes]:
    log.error("unhandled error", exc_info=exc)
    return problem_response(500, "The server could not answer this request.")


EXCEPTION_HANDLERS: ExceptionHandlersMap = {
    DomainError: _domain_error,
    ValidationException: _validation_error,
    HTTPException: _http_error,
    DBAPIError: _database_unavailable,
    PoolTimeoutError: _database_unavailable,
    Exception: _internal_error,
}
