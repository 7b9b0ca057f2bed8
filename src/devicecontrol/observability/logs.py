"""Structured log lines: one JSON object, or one ``key=value`` line for people, per record.

Every record of a ``serve`` process goes to stderr in the chosen format, uvicorn's own
included. A structured record (``emit``) carries its fields in ``record.fields``; any other
record is rendered with its message and, during a request, that request's id. Values are
escaped in both formats, so nothing a client sends can start a line of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import logging.config
import re
import time
from contextvars import ContextVar
from typing import Any

import msgspec

# the id of the request being served, for every line written while serving it
REQUEST_ID: ContextVar[str | None] = ContextVar("devicecontrol_request_id", default=None)

_LEVEL_NAMES = {
    logging.DEBUG: "debug",
    logging.INFO: "info",
    logging.WARNING: "warning",
    logging.ERROR: "error",
    logging.CRITICAL: "critical",
}
_encode = msgspec.json.Encoder(enc_hook=str).encode
# a text value made of these is written bare; anything else is quoted and escaped as JSON
_BARE_TEXT = re.compile(r"[\w.:/{}@+=,\-]+")
_second: tuple[int, str] = (-1, "")


def _timestamp(created: float) -> str:
    """UTC with milliseconds; the seconds part is formatted once per second, not per line."""
    global _second
    second = int(created)
    cached = _second
    if cached[0] != second:
        cached = _second = (second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second)))
    return f"{cached[1]}.{int((created - second) * 1000):03d}Z"


def _level(record: logging.LogRecord) -> str:
    return _LEVEL_NAMES.get(record.levelno) or record.levelname.lower()


def emit(logger: logging.Logger, level: int, fields: dict[str, Any]) -> None:
    """Write one structured record (``fields["event"]`` names it), skipping the caller lookup.

    Callers on the request path check ``logger.isEnabledFor(level)`` before building fields.
    """
    if logger.isEnabledFor(level):
        record = logger.makeRecord(
            logger.name, level, "", 0, fields["event"], (), None, extra={"fields": fields}
        )
        logger.handle(record)


class JsonFormatter(logging.Formatter):
    """``{"ts": ..., "level": ..., "logger": ..., "event": ..., ...}``: one object per line."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": _timestamp(record.created),
            "level": _level(record),
            "logger": record.name,
        }
        fields = record.__dict__.get("fields")
        if fields is not None:
            line.update(fields)
        else:
            line["message"] = record.getMessage()
            request_id = REQUEST_ID.get()
            if request_id is not None:
                line["request_id"] = request_id
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return _encode(line).decode()


def _text_value(value: Any) -> str:
    text = value if isinstance(value, str) else str(value)
    if isinstance(value, bool | int | float) or _BARE_TEXT.fullmatch(text):
        return text
    return _encode(text).decode()


class TextFormatter(logging.Formatter):
    """``TS LEVEL EVENT key=value ...`` (or ``TS LEVEL LOGGER message``): for people."""

    def format(self, record: logging.LogRecord) -> str:
        head = f"{_timestamp(record.created)} {_level(record).upper()}"
        fields = record.__dict__.get("fields")
        if fields is not None:
            pairs = " ".join(
                f"{key}={_text_value(value)}"
                for key, value in fields.items()
                if key != "event" and value is not None
            )
            line = f"{head} {_text_value(fields['event'])} {pairs}"
        else:
            line = f"{head} {record.name} {record.getMessage()}"
            request_id = REQUEST_ID.get()
            if request_id is not None:
                line += f" request_id={request_id}"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


class LoopBatchedStreamHandler(logging.StreamHandler):  # type: ignore[type-arg,unused-ignore]
    """Lines written during one turn of the event loop go out in one write, at its end.

    A write and flush per line cost about as much as a request's metrics under load; a
    turn of the loop lasts well under a millisecond, so a line is late by no more than that.
    Outside a running loop (another thread, start-up, the CLI) a line is written at once.
    """

    def __init__(self, stream: Any = None) -> None:
        super().__init__(stream)
        self._pending: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record)
        except Exception:
            self.handleError(record)
            return
        self._pending.append(line)
        if len(self._pending) > 1:
            return  # the write of this turn is already scheduled
        try:
            asyncio.get_running_loop().call_soon(self.flush)
        except RuntimeError:
            self.flush()

    def flush(self) -> None:
        with self.lock:  # type: ignore[union-attr]
            if self._pending:
                text = "\n".join(self._pending) + "\n"
                self._pending.clear()
                # a log that cannot be written is no reason to fail a request
                with contextlib.suppress(Exception):
                    self.stream.write(text)
            super().flush()


FORMATTERS = {"json": JsonFormatter, "text": TextFormatter}
# the audit trail is written whatever the log level: quieting the log must not erase it
AUDIT_LOGGER = "devicecontrol.audit"
AUDIT_LEVEL = "INFO"


def _handler_config(log_format: str) -> dict[str, Any]:
    formatter = FORMATTERS[log_format]
    return {
        "formatters": {"line": {"()": f"{formatter.__module__}.{formatter.__qualname__}"}},
        "handlers": {
            "stderr": {
                "class": f"{__name__}.LoopBatchedStreamHandler",
                "formatter": "line",
                "stream": "ext://sys.stderr",
            }
        },
    }


def serve_logging_config(log_level: str, log_format: str) -> dict[str, Any]:
    """The ``logging.config.dictConfig`` that uvicorn applies in every worker process.

    The service's and uvicorn's loggers write at ``log_level`` (audit lines always);
    everything else (SQLAlchemy, asyncio) only from WARNING, so debug never logs SQL
    statements or their parameters.
    uvicorn's access log is off: the request log (``request_log``) replaces it.
    """
    level = log_level.upper()
    return {
        "version": 1,
        "disable_existing_loggers": False,
        **_handler_config(log_format),
        "loggers": {
            "devicecontrol": {"handlers": ["stderr"], "level": level, "propagate": False},
            AUDIT_LOGGER: {"level": AUDIT_LEVEL},
            "uvicorn": {"handlers": ["stderr"], "level": level, "propagate": False},
            "uvicorn.error": {"handlers": [], "level": level, "propagate": True},
            "uvicorn.access": {"handlers": [], "level": "WARNING", "propagate": False},
        },
        "root": {"handlers": ["stderr"], "level": "WARNING"},
    }


def configure_cli_logging(log_level: str, log_format: str) -> None:
    """The operators' commands write the service's records (audit lines) to stderr too."""
    logging.config.dictConfig(
        {
            "version": 1,
            "disable_existing_loggers": False,
            **_handler_config(log_format),
            "loggers": {
                "devicecontrol": {
                    "handlers": ["stderr"],
                    "level": log_level.upper(),
                    "propagate": False,
                },
                AUDIT_LOGGER: {"level": AUDIT_LEVEL},
            },
        }
    )
