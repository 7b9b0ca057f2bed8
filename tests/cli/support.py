"""What the CLI tests share: running a command off the event loop, and reading the tables.

``cli`` runs the command in this process with click's CliRunner: the same ``main`` the
``devicecontrol`` script calls, without a Python start-up (0.6-1 s) per command. ``cli_process``
runs the real ``devicecontrol`` process, for the few tests about what only a process shows:
the environment and working directory it starts with, a prompt read from a real pipe, many
processes at once. Both report an exit status, stdout and stderr, kept apart.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import csv
import functools
import io
import logging
import os
import re
import subprocess
import sys
import threading
import traceback
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from sqlalchemy import select

from devicecontrol.cli import main
from devicecontrol.database.tables import metadata
from devicecontrol.devices.identity import authenticate_device
from devicecontrol.runtime import Runtime
from tests.processes import DEVICECONTROL, run_cli

# CliRunner swaps sys.stdin, sys.stdout, sys.stderr and os.environ: one command at a time
_ONE_AT_A_TIME = threading.Lock()
# configure_cli_logging (dictConfig) resets this logger and those below it, for each command
_SERVICE_LOGGER = "devicecontrol"


async def cli(
    *args: str, database_url: str | None = None, **kwargs: Any
) -> subprocess.CompletedProcess[str]:
    """``devicecontrol ARGS --database-url URL`` in this process, awaited in a thread.

    The command calls asyncio.run, which cannot run on the test's event loop thread.
    """
    return await asyncio.to_thread(run_cli_in_process, *args, database_url=database_url, **kwargs)


async def cli_process(
    *args: str, database_url: str | None = None, **kwargs: Any
) -> subprocess.CompletedProcess[str]:
    """``devicecontrol ARGS --database-url URL`` as a real process, awaited in a thread."""
    return await asyncio.to_thread(run_cli, *args, database_url=database_url, **kwargs)


def run_cli_beside_the_loop(*args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """``run_cli_in_process`` on a thread of its own, waited for: callable from a test's
    event loop thread (which it blocks meanwhile, as ``run_cli``'s process would), where
    the command's own ``asyncio.run`` cannot run. For tests whose subject is not the
    process (provisioning a fleet): a Python start-up is 1.3 s of a core."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as thread:
        return thread.submit(run_cli_in_process, *args, **kwargs).result()


def run_cli_in_process(
    *args: str,
    database_url: str | None = None,
    input: str | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """What ``run_cli`` reports, from ``main`` run in this process.

    As in the child process, no DEVICECONTROL_* variable of this process is seen, only
    those in ``env``; stdin holds ``input`` (or nothing), and is not a terminal, nor are
    stdout and stderr. An exception escaping ``main`` is printed as the interpreter would,
    with status 1.
    """
    command = [*args]
    if database_url is not None:
        command += ["--database-url", database_url]
    environment: dict[str, str | None] = {
        name: None for name in os.environ if name.startswith("DEVICECONTROL_")
    }
    environment.update(env or {})
    with (
        _ONE_AT_A_TIME,
        _service_logging_restored(),
        contextlib.chdir(cwd) if cwd is not None else contextlib.nullcontext(),
    ):
        runner = _runner()
        with runner.isolation(input=input, env=environment) as streams:
            try:
                main.main(args=command, prog_name="devicecontrol")
                status = 0
            except SystemExit as exc:
                status = _exit_status(exc.code)
            except Exception:
                traceback.print_exc()
                status = 1
            finally:
                # as logging.shutdown does at exit: lines still held go out now, on this stderr
                for handler in logging.getLogger(_SERVICE_LOGGER).handlers:
                    handler.flush()
                sys.stdout.flush()
                sys.stderr.flush()
            stdout, stderr = (stream.getvalue().decode(runner.charset) for stream in streams[:2])
    return subprocess.CompletedProcess([*DEVICECONTROL, *command], status, stdout, stderr)


def _runner() -> CliRunner:
    try:
        return CliRunner(mix_stderr=False)  # type: ignore[call-arg]  # click < 8.2
    except TypeError:
        return CliRunner()  # click 8.2+: stderr is always kept apart


def _exit_status(code: object) -> int:
    """The status a process ends with after ``sys.exit(code)``."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


@contextlib.contextmanager
def _service_logging_restored() -> Iterator[None]:
    """Give the service's loggers back as they were before the command configured them.

    A command sends them to its own stderr only (propagate off): left so, they would keep
    writing to a finished command's stream, and records would no longer reach pytest's
    caplog in the tests that follow.
    """
    logging.getLogger(_SERVICE_LOGGER)  # a real logger, not a placeholder, to be restored
    saved = {
        logger: (logger.handlers[:], logger.level, logger.propagate, logger.disabled)
        for logger in _service_loggers()
    }
    try:
        yield
    finally:
        for logger in _service_loggers():
            handlers, level, propagate, disabled = saved.get(
                logger, ([], logging.NOTSET, True, False)
            )
            for handler in logger.handlers:
                if handler not in handlers:
                    handler.close()
            logger.handlers = handlers
            logger.setLevel(level)
            logger.propagate = propagate
            logger.disabled = disabled


def _service_loggers() -> list[logging.Logger]:
    return [
        logger
        for name, logger in list(logging.root.manager.loggerDict.items())
        if isinstance(logger, logging.Logger)
        and (name == _SERVICE_LOGGER or name.startswith(_SERVICE_LOGGER + "."))
    ]


def assert_succeeded(result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}\n{result.stderr}"


def csv_column(result: subprocess.CompletedProcess[str], column: str) -> list[str]:
    """One column of what a ``--format csv`` command that succeeded printed, in its order."""
    assert_succeeded(result)
    return [row[column] for row in csv.DictReader(io.StringIO(result.stdout))]


def reported_lines(stderr: str) -> list[int]:
    """The CSV lines an import reported on stderr (``line N: ...``), in their order."""
    return [int(n) for n in re.findall(r"^line (\d+): ", stderr, flags=re.MULTILINE)]


def assert_one_line_error(result: subprocess.CompletedProcess[str], *fragments: str) -> str:
    """Exit status 1, nothing on stdout, exactly one line on stderr (returned)."""
    assert result.returncode == 1, f"exit {result.returncode}\n{result.stdout}\n{result.stderr}"
    lines = result.stderr.splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got:\n{result.stderr}"
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    for fragment in fragments:
        assert fragment.lower() in lines[0].lower(), lines[0]
    return lines[0]


@functools.cache
def _every_row_of_every_table() -> dict[str, Any]:
    """One query per table, built once: building them was two thirds of a snapshot's time."""
    return {table.name: select(table).order_by(*table.c) for table in metadata.sorted_tables}


async def snapshot(runtime: Runtime) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table, to show that a failed command wrote nothing."""
    async with runtime.database.read() as connection:
        return {
            name: [tuple(row) for row in await connection.execute(query)]
            for name, query in _every_row_of_every_table().items()
        }


async def rows(runtime: Runtime, table: Any, *where: Any) -> list[Any]:
    async with runtime.database.read() as connection:
        query = select(table).where(*where).order_by(table.c.id)
        return list(await connection.execute(query))


async def connects(runtime: Runtime, serial: str, secret: str) -> bool:
    """Whether the device link would let the device in with this secret (contract §9)."""
    device = await authenticate_device(
        runtime, client_id=serial, username=serial, password=secret, address="192.0.2.1"
    )
    return device is not None and device.serial_number == serial
