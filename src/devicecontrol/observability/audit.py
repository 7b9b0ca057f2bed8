"""Audit lines: who did what to which token, account or controller, and how it ended.

One structured line per action on the ``devicecontrol.audit`` logger, written by the
service that carries the action out: ``event`` (login, renew, revoke, assign, reassign,
release, password_change, user_disable), ``outcome`` (success; failure: a rule refused it,
with a ``reason``; error: it could not be carried out, e.g. the database was down), the
request id, and the ids involved. Ids only, and only ids that matched a record: never a
password, token, client secret or claim code, and never a name the client typed that
matched nothing (a username typed wrong is sometimes the password).
"""

from __future__ import annotations

import logging
from types import TracebackType
from typing import Any

from devicecontrol.errors import DomainError, OAuthError
from devicecontrol.observability.logs import REQUEST_ID, emit
from devicecontrol.observability.metrics import count_audited

SUCCESS = "success"
FAILURE = "failure"
ERROR = "error"

audit_log = logging.getLogger("devicecontrol.audit")


def _reason(exc: DomainError) -> str:
    """The RFC 6749 code of a token endpoint's error, else the status phrase in snake case."""
    if isinstance(exc, OAuthError):
        return exc.code
    return exc.title.lower().replace(" ", "_").replace("-", "_")


def record(event: str, outcome: str, **fields: Any) -> None:
    """Write one audit line now (and count it, for the events that have metrics)."""
    emit(
        audit_log,
        logging.INFO,
        {"event": event, "outcome": outcome, "request_id": REQUEST_ID.get(), **fields},
    )
    count_audited(event, outcome)


class AuditEvent:
    """``with AuditEvent("login", ...) as event:`` writes the line when the block ends.

    The outcome follows from how the block ends; ``event.fields`` takes the ids that turn
    up on the way (the user a username belongs to, the client that authenticated).
    """

    __slots__ = ("event", "fields")

    def __init__(self, event: str, **fields: Any) -> None:
        self.event = event
        self.fields = fields

    def __enter__(self) -> AuditEvent:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if exc is None:
            record(self.event, SUCCESS, **self.fields)
        elif isinstance(exc, DomainError):
            record(self.event, FAILURE, **self.fields, reason=_reason(exc))
        else:
            record(self.event, ERROR, **self.fields, reason=type(exc).__name__)
