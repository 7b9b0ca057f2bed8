"""The comparison servers measured beside the service: what the same reads cost elsewhere.

Two apps in bench/, started like the ceiling (same uvicorn, options and workers) on the
run's database, never imported by the service or by this harness:

- ``plain_app.py``: a raw ASGI app doing the service's look-ups with stdlib ``sqlite3`` and
  msgspec (SQLite only): about the most a Python app can make of the same work here;
- ``fastapi_app.py``: the usual FastAPI + SQLAlchemy async ORM way, on both backends
  (needs the ``bench`` extra).

Each runs only the scenarios it answers; its rows in the table carry its label.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

from sqlalchemy.engine import make_url

INSTALL_HINT = "pip install -e '.[bench]'"
BACKEND_NAMES = {"sqlite": "SQLite", "postgresql": "PostgreSQL"}


@dataclass(frozen=True, slots=True)
class Comparison:
    label: str
    module: str  # bench/<module>.py, served as <module>:create_app
    variable: str  # the environment variable naming the database
    scenarios: tuple[str, ...]
    backends: tuple[str, ...]
    requires: tuple[str, ...] = ()  # importable modules it needs beyond the service's
    wants_path: bool = False  # the SQLite file's path rather than the URL

    def missing(self) -> str | None:
        """The first required module that is not installed, if any."""
        return next(
            (name for name in self.requires if importlib.util.find_spec(name) is None), None
        )

    def why_not(self, backend: str) -> str | None:
        """Why this comparison cannot run on ``backend``; None when it can."""
        if backend not in self.backends:
            return " and ".join(BACKEND_NAMES[name] for name in self.backends) + " only"
        missing = self.missing()
        if missing is not None:
            return f"{missing} is not installed ({INSTALL_HINT})"
        return None

    def env_value(self, database_url: str) -> str:
        if self.wants_path:
            return str(make_url(database_url).database)
        return database_url


PLAIN = Comparison(
    label="plain ASGI + sqlite3",
    module="plain_app",
    variable="BENCH_PLAIN_DATABASE",
    scenarios=("read", "list25", "list100"),
    backends=("sqlite",),
    wants_path=True,
)
FASTAPI = Comparison(
    label="FastAPI + SQLAlchemy ORM",
    module="fastapi_app",
    variable="BENCH_FASTAPI_DATABASE_URL",
    scenarios=("read", "list25", "list100"),
    backends=("sqlite", "postgresql"),
    requires=("fastapi", "pydantic"),
)
COMPARISONS = (PLAIN, FASTAPI)


def for_scenario(name: str) -> list[Comparison]:
    return [comparison for comparison in COMPARISONS if name in comparison.scenarios]


def describe() -> str:
    """One line for the run's context: which comparisons run where."""
    parts = []
    for comparison in COMPARISONS:
        state = comparison.missing()
        where = f"{', '.join(comparison.scenarios)} on {', '.join(comparison.backends)}"
        parts.append(
            f"{comparison.label} ({where})"
            + (f" [not installed: {state}]" if state is not None else "")
        )
    return "; ".join(parts)
