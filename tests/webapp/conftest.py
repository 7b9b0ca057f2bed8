"""The web app's tests build the app with its pages (the suite's default leaves them out)."""

from __future__ import annotations

import pytest

from devicecontrol.config import Settings


@pytest.fixture
def settings(database_url: str) -> Settings:
    return Settings(database_url=database_url)
