"""The Jinja2 environment of the app's templates: autoescaped, with the words of the
catalogue (``t``) and how a reading is shown, for Litestar's template support."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from litestar.plugins.jinja import JinjaTemplateEngine
from litestar.template import TemplateConfig
from markupsafe import Markup

from devicecontrol.webapp.schedules import offered
from devicecontrol.webapp.wording import words, words_or

TEMPLATES = Path(__file__).parent / "templates"


def reading_html(reading: dict[str, Any] | list[Any] | None) -> Markup:
    """A reading's (or a command's parameters') fields in one line (``temp 21.5 · humidity
    40``), as the page's script shows a live one: each name and each value in a ``<bdi>``
    of its own, so that a device's right-to-left override (U+202E) or other bidirectional
    text turns only its own value around, never the fields after it (escaped, as
    everything is)."""
    if not isinstance(reading, dict):
        return Markup("")
    return Markup(" · ").join(
        Markup('<span class="field"><bdi>{}</bdi> <bdi>{}</bdi></span>').format(name, value)
        for name, value in reading.items()
        if name != "created"
    )


def fields_html(stored: str | None) -> Markup:
    """A command's fields as a schedule stores them (JSON text), as ``reading_html``."""
    return reading_html(json.loads(stored)) if stored else Markup("")


def moment_text(moment: datetime | None) -> str:
    """A UTC time to the second, as the API's bodies write it (without the zone's letter)."""
    return "" if moment is None else moment.strftime("%Y-%m-%d %H:%M:%S")


def days_text(days: str) -> str:
    """A schedule's ``days`` (seven 0/1, Monday first) as the days' short names."""
    return " ".join(words(f"day.{i}") for i, on in enumerate(days) if on == "1")


def template_config() -> TemplateConfig[JinjaTemplateEngine]:
    environment = Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=select_autoescape(default=True),
        undefined=StrictUndefined,  # a misspelt name fails in the tests, not silently
        auto_reload=False,
    )
    environment.globals["t"] = words
    environment.globals["t_or"] = words_or
    environment.globals["offered"] = offered
    environment.filters["reading_html"] = reading_html
    environment.filters["fields_html"] = fields_html
    environment.filters["moment_text"] = moment_text
    environment.filters["days_text"] = days_text
    return TemplateConfig(instance=JinjaTemplateEngine.from_environment(environment))
