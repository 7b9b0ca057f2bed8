"""The Jinja2 environment of the app's templates: autoescaped, with the words of the
catalogue (``t``) and how a reading is shown, for Litestar's template support."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from litestar.plugins.jinja import JinjaTemplateEngine
from litestar.template import TemplateConfig

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


def template_config() -> TemplateConfig[JinjaTemplateEngine]:
    environment = Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=select_autoescape(default=True),
        undefined=StrictUndefined,  # a misspelt name fails in the tests, not silently
        auto_reload=False,
    )
    environment.globals["t"] = words
    environment.globals["t_or"] = words_or
    environment.filters["reading_text"] = reading_text
    environment.filters["moment_text"] = moment_text
    return TemplateConfig(instance=JinjaTemplateEngine.from_environment(environment))
