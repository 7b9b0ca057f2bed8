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

from devicecontrol.webapp.schedules import offered
from devicecontrol.webapp.wording import words, words_or

TEMPLATES = Path(__file__).parent / "templates"


def reading_text(reading: dict[str, Any] | list[Any] | None) -> str:
    """A reading's (or a command's parameters') fields in one line (``temp 21.5 ·
    humidity 40``), as the page's script shows a live one; "" for none."""
    if not isinstance(reading, dict):
        return ""
    return " · ".join(f"{name} {value}" for name, value in reading.items() if name != "created")


def moment_text(moment: datetime | None) -> str:
    """A UTC time to the second, as the API's bodies write it (without the zone's letter)."""
    return "" if moment is None else moment.strftime("%Y-%m-%d %H:%M:%S")


def fields_text(stored: str | None) -> str:
    """A command's fields as a schedule stores them (JSON text), in one line."""
    return reading_text(json.loads(stored)) if stored else ""


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
    environment.filters["reading_text"] = reading_text
    environment.filters["moment_text"] = moment_text
    environment.filters["fields_text"] = fields_text
    environment.filters["days_text"] = days_text
    return TemplateConfig(instance=JinjaTemplateEngine.from_environment(environment))
