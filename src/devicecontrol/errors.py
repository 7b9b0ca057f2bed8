"""Domain errors, and how a database outage is told from a bug.

Services raise the domain errors below and never build HTTP responses; their one mapping to
RFC 9457 problem+json is ``http/problems.py``. The CLI and the schedule runner tell an
outage from a bug with ``is_database_outage`` too.
"""

from __future__ import annotations

import sqlite3
from http import HTTPStatus
from typing import Any, ClassVar

import msgspec
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError

from devicecontrol.database.engine import DatabaseUnreachable

PROBLEM_MEDIA_TYPE = "application/problem+json"
REALM = 'Bearer realm="devicecontrol"'
# SQLSTATEs of a server that cannot serve any session right now, whatever the query:
# 08 connection exception, 53 insufficient resources (too many connections, disk full),
# 57P0x shutting down, crashed, or still starting up ("the database system is starting up")
OUTAGE_SQLSTATE_PREFIXES = ("08", "53", "57P0")
# SQLite's primary result codes of a file it cannot use right now: busy or locked past the
# busy timeout, out of memory, an I/O error, a full disk, a file it cannot open. Every other
# OperationalError (no such table, a syntax error) is a bug in a query.
OUTAGE_SQLITE_CODES = frozenset({5, 6, 7, 10, 13, 14})


class FieldError(msgspec.Struct, frozen=True):
    field: str
    message: str


class DomainError(Exception):
    """A rule the request broke; subclasses fix the status."""

    status: ClassVar[int] = 400

    def __init__(
        self,
        detail: str,
        *,
        errors: list[FieldError] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(detail)
        self.detail = detail
        self.errors = errors
        self.headers = headers or {}

    @property
    def title(self) -> str:
        return HTTPStatus(self.status).phrase

    def extra_members(self) -> dict[str, Any]:
        return {"errors": [msgspec.to_builtins(e) for e in self.errors]} if self.errors else {}


class BadRequest(DomainError):
    status = 400


class InvalidField(BadRequest):
    """One field failed validation: 400 with an ``errors`` entry naming it."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}", errors=[FieldError(field, message)])


class InvalidFields(BadRequest):
    """Several fields failed validation: 400 with an ``errors`` entry for each."""

    def __init__(self, errors: list[FieldError]) -> None:
        detail = "; ".join(f"{error.field}: {error.message}" for error in errors)
        super().__init__(detail, errors=errors)


class Unauthenticated(DomainError):
    status = 401

    def __init__(self, detail: str, *, invalid_token: bool) -> None:
        challenge = f'{REALM}, error="invalid_token"' if invalid_token else REALM
        super().__init__(detail, headers={"WWW-Authenticate": challenge})


class Forbidden(DomainError):
    status = 403


class NotFound(DomainError):
    status = 404


class Conflict(DomainError):
    status = 409


class TooManyRequests(DomainError):
    status = 429

    def __init__(self, detail: str, *, retry_after_s: int) -> None:
        super().__init__(detail, headers={"Retry-After": str(max(1, retry_after_s))})


class UnsupportedMediaType(DomainError):
    status = 415


class Unprocessable(DomainError):
    status = 422

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}", errors=[FieldError(field, message)])


class OAuthError(DomainError):
    """RFC 6749 §5.2 error of the token endpoints: the code is both ``title`` and ``error``."""

    STATUS_BY_CODE: ClassVar[dict[str, int]] = {
        "invalid_request": 400,
        "invalid_client": 401,
        "invalid_grant": 400,
        "unsupported_grant_type": 400,
    }

    def __init__(self, code: str, detail: str, *, errors: list[FieldError] | None = None) -> None:
        # the token endpoints add Cache-Control/Pragma to every error they answer
        headers = (
            {"WWW-Authenticate": 'Basic realm="devicecontrol"'}
            if code == "invalid_client"
            else None
        )
        super().__init__(detail, errors=errors, headers=headers)
        self.code = code
        self.status = self.STATUS_BY_CODE[code]  # type: ignore[misc]

    @property
    def title(self) -> str:
        return self.code

    def extra_members(self) -> dict[str, Any]:
        return {"error": self.code, **super().extra_members()}


def is_database_outage(exc: BaseException) -> bool:
    """The database cannot serve right now (refused, reset, timed out, locked, unopenable).

    Only errors of the database layer qualify: any other exception, an ``OSError`` included,
    is a bug to be logged with its traceback, never a 503 that hides it.
    """
    if isinstance(exc, PoolTimeoutError | DatabaseUnreachable):
        return True
    if not isinstance(exc, DBAPIError):
        return False
    if exc.connection_invalidated:
        return True
    if isinstance(exc.orig, sqlite3.Error):
        code = getattr(exc.orig, "sqlite_errorcode", None)
        return isinstance(code, int) and (code & 0xFF) in OUTAGE_SQLITE_CODES
    if isinstance(exc, OperationalError | InterfaceError):
        return True
    # asyncpg's refusals while connecting arrive as a plain DBAPIError carrying the SQLSTATE
    sqlstate = getattr(exc.orig, "sqlstate", None)
    return isinstance(sqlstate, str) and sqlstate.startswith(OUTAGE_SQLSTATE_PREFIXES)
