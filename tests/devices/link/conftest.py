"""The fixtures of the tests against a private Mosquitto (``test_mosquitto_broker.py``,
``test_mosquitto_shards.py``), kept once so that both files test the same broker."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.mosquitto import DynsecMosquitto, dynsec_mosquitto


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[DynsecMosquitto]:
    """A private Mosquitto 2 with dynamic security, set up as docs/OPERATIONS.md says."""
    with dynsec_mosquitto(tmp_path / "mosquitto") as mosquitto:
        yield mosquitto


@pytest.fixture
def sqlite_url(database_factories: Any, tmp_path: Path) -> str:
    """For the tests whose subject is the broker, not the database: SQLite only."""
    return str(database_factories["sqlite"].new_url(tmp_path))
