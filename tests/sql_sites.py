"""The PostgreSQL half runs every query the SQLite half does: a check at the end of a run.

Tests whose checks are decided before a query reaches the database run on SQLite alone
(``SQLITE_ENOUGH`` in ``tests/conftest.py``). What keeps that safe: every place in the
service's code that sends a statement through SQLAlchemy in a test on SQLite must send one
in a test on PostgreSQL too. Each worker notes the places (the first frame of
``src/devicecontrol`` outside ``database/`` that led to the statement) per dialect; at the
end of a whole run with PostgreSQL the run fails, naming each place SQLite alone reached.

Only statements of this process are seen (in-process tests): the few places that run on
PostgreSQL only in a ``serve`` or link process a test starts are ``REACHED_IN_PROCESSES``.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import tempfile
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

import greenlet
import pytest
from sqlalchemy import event
from sqlalchemy.engine import Engine

import devicecontrol

SITES_DIRECTORY_VARIABLE = "DEVICECONTROL_TEST_SQL_SITES"
_PACKAGE = Path(devicecontrol.__file__).parent
_DATABASE = _PACKAGE / "database"
_seen: dict[str, set[str]] = {"sqlite": set(), "postgresql": set()}
# places whose statements run on PostgreSQL only in processes a test starts, where this
# check cannot see them; each names the tests that reach it there
REACHED_IN_PROCESSES = {
    # a link on an external broker sets or adopts who is online when it (re)connects
    "devices/repository.py:set_online": "test_mosquitto_shards, behaviour suite (-2 fleets)",
    "devices/repository.py:online_devices": "behaviour suite (mosquitto-2, rabbitmq-2)",
    # a stream's slot given back when it ends
    "events/repository.py:delete_open": "tests/events/test_streams.py (serve, both)",
}


@functools.cache
def _site_of(code: CodeType) -> str | None:
    """``module.py:function`` for the service's code outside ``database/``, else None
    (asked of every frame of every statement: once per function)."""
    path = Path(code.co_filename)
    if path.is_relative_to(_PACKAGE) and not path.is_relative_to(_DATABASE):
        return f"{path.relative_to(_PACKAGE)}:{code.co_name}"
    return None


def _call_site(frame: FrameType | None) -> str | None:
    """The site of the first service frame outside ``database/``. On PostgreSQL SQLAlchemy
    runs the statement in a greenlet of its own: the caller's frames are those of the
    greenlet it waits in."""
    waiting = greenlet.getcurrent()
    while True:
        while frame is not None:
            site = _site_of(frame.f_code)
            if site is not None:
                return site
            frame = frame.f_back
        waiting = waiting.parent
        if waiting is None:
            return None
        frame = waiting.gr_frame


def _note(connection: Any, *_: Any) -> None:
    site = _call_site(sys._getframe(1))
    if site is not None:
        _seen.setdefault(connection.dialect.name, set()).add(site)


def _whole_run(config: pytest.Config) -> bool:
    """Only a run of the whole suite can say what PostgreSQL never reached."""
    chosen = [str(Path(arg).resolve()) for arg in config.args]
    everything = [str(Path(config.rootpath, path).resolve()) for path in config.getini("testpaths")]
    narrowed = (
        config.option.keyword or config.option.markexpr or getattr(config.option, "lf", False)
    )
    return (not chosen or chosen == everything) and not narrowed


def pytest_configure(config: pytest.Config) -> None:
    if not os.environ.get("DEVICECONTROL_TEST_POSTGRESQL_URL"):
        return
    event.listen(Engine, "before_cursor_execute", _note)
    if not hasattr(config, "workerinput") and SITES_DIRECTORY_VARIABLE not in os.environ:
        # the controller: the workers it starts inherit the directory
        os.environ[SITES_DIRECTORY_VARIABLE] = tempfile.mkdtemp(prefix="devicecontrol-sql-")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    directory = os.environ.get(SITES_DIRECTORY_VARIABLE)
    if directory is None:
        return
    mine = {dialect: sorted(sites) for dialect, sites in _seen.items()}
    Path(directory, f"{os.getpid()}.json").write_text(json.dumps(mine), encoding="utf-8")
    if hasattr(session.config, "workerinput"):
        return
    seen: dict[str, set[str]] = {"sqlite": set(), "postgresql": set()}
    for part in Path(directory).glob("*.json"):
        for dialect, sites in json.loads(part.read_text(encoding="utf-8")).items():
            seen.setdefault(dialect, set()).update(sites)
        part.unlink()
    Path(directory).rmdir()
    if exitstatus != 0 or not _whole_run(session.config):
        return
    missing = sorted(seen["sqlite"] - seen["postgresql"] - REACHED_IN_PROCESSES.keys())
    if missing:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        lines = "\n".join(f"  {site}" for site in missing)
        message = (
            f"{len(missing)} places send SQL only in tests on SQLite; run a test that "
            f"reaches each on PostgreSQL too (tests/sql_sites.py):\n{lines}"
        )
        if reporter is not None:
            reporter.write_line(message, red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
