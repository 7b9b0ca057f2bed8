"""Every word the app shows, from one catalogue file per language (text/<language>.json):
a second language is a second file, not a change to the templates or the code."""

from __future__ import annotations

import json
from functools import cache
from importlib.resources import files
from typing import Any

DEFAULT_LANGUAGE = "en"


@cache
def catalogue(language: str = DEFAULT_LANGUAGE) -> dict[str, str]:
    text = files("devicecontrol.webapp").joinpath("text", f"{language}.json").read_text("utf-8")
    loaded: dict[str, str] = json.loads(text)
    return loaded


def words(key: str, **values: Any) -> str:
    """The catalogue's text for ``key``, with ``{name}`` filled from ``values``. A missing
    key is a KeyError: the tests render every page, so it cannot reach a user."""
    text = catalogue()[key]
    return text.format(**values) if values else text


def words_or(key: str, default: str) -> str:
    """The catalogue's text for ``key`` where the catalogue may have none (a command or a
    value the catalogue of device types gained later): ``default``, as the API names it."""
    return catalogue().get(key, default)
