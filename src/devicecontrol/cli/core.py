"""What every command shares: one-line errors with exit status 1, and the database option.

Every failure (bad option, bad input, unreachable database) is one line on stderr and exit
status 1; nothing is half-written, because each service call writes in one transaction.
"""

from __future__ import annotations

import asyncio
import sqlite3
import sys
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import click
from sqlalchemy.exc import DBAPIError

from devicecontrol.config import SettingsError, load_settings
from devicecontrol.database.migrate import upgrade_database
from devicecontrol.errors import DomainError, is_database_outage
from devicecontrol.observability.logs import configure_cli_logging
from devicecontrol.runtime import Runtime

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


class OperatorError(click.ClickException):
    """Printed as one line; exit status 1."""

    exit_code = 1


class OneLineErrorGroup(click.Group):
    """Usage errors exit 1 with one line too, not click's usual status 2 and usage block."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        kwargs["standalone_mode"] = False
        try:
            result = super().main(*args, **kwargs)
        except click.exceptions.Exit as exc:
            sys.exit(exc.exit_code)
        except click.exceptions.NoArgsIsHelpError as exc:
            # a bare group (`devicecontrol`, `devicecontrol users`) shows its help, as --help does
            click.echo(exc.ctx.get_help())
            sys.exit(0)
        except click.Abort:
            click.echo("Error: aborted", err=True)
            sys.exit(1)
        except click.ClickException as exc:
            message = " ".join(exc.format_message().split())
            click.echo(f"Error: {message}", err=True)
            sys.exit(1)
        sys.exit(result if isinstance(result, int) else 0)


@click.group(cls=OneLineErrorGroup)
@click.version_option(package_name="devicecontrol")
def main() -> None:
    """devicecontrol: the device-control cloud service and its operators' tools."""


def build_runtime(database_url: str | None) -> Runtime:
    """The runtime of one command; its audit lines (users set-password, ...) go to stderr."""
    try:
        settings = load_settings().with_database_url(database_url)
        runtime = Runtime.from_settings(settings)
    except SettingsError as exc:
        raise OperatorError(str(exc)) from None
    configure_cli_logging(settings.log_level, settings.log_format)
    return runtime


def run_with_database(
    database_url: str | None, work: Callable[[Runtime], Coroutine[Any, Any, T]]
) -> T:
    """Create or upgrade the schema, run one service call, and report its errors in one line."""
    runtime = build_runtime(database_url)
    _check_sqlite_file(runtime)

    async def migrate_then_work() -> T:
        try:
            await upgrade_database(runtime.database)
            return await work(runtime)
        finally:
            await runtime.close()

    try:
        return asyncio.run(migrate_then_work())
    except DomainError as exc:
        raise OperatorError(exc.detail) from None
    except DBAPIError as exc:
        # the driver's socket errors arrive as DatabaseUnreachable; any other OSError is a bug
        cause = exc.orig or exc
        reason = (str(cause).strip().splitlines() or [type(cause).__name__])[0]
        what = "database unavailable" if is_database_outage(exc) else "database error"
        raise OperatorError(f"{what}: {reason}") from None


def _check_sqlite_file(runtime: Runtime) -> None:
    """Open an SQLite file once, synchronously, before the event loop starts: a file that
    cannot be opened is one line on stderr before anything else runs (aiosqlite, the
    driver before, once printed a traceback after it from its worker thread)."""
    if not runtime.database.is_sqlite:
        return
    try:
        sqlite3.connect(runtime.database.engine.url.database or "").close()
    except sqlite3.Error as exc:
        raise OperatorError(f"database unavailable: {exc}") from None


def database_option(command: F) -> F:
    return click.option(
        "--database-url",
        envvar="DEVICECONTROL_DATABASE_URL",
        default=None,
        metavar="URL",
        help="sqlite:///path.db or postgresql://user@host/db  [default: sqlite:///./devicecontrol.db]",
    )(command)


def password_option(command: F) -> F:
    return click.option(
        "--password",
        prompt=True,
        hide_input=True,
        confirmation_prompt=True,
        help="Prompted for (hidden) when not given.",
    )(command)
