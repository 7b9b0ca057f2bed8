"""What every helper process of ``serve`` does the same way (the device link's,
``process.py``, and the broker hook's, ``hook/process.py``): its first line on stdout is
``ready`` or the one-line reason it cannot start, which ``supervisor.py`` reads; it reads
its settings from the environment and logs as ``serve`` does.
"""

from __future__ import annotations

import asyncio
import logging.config
import sys
from collections.abc import Callable, Coroutine
from typing import Any

from devicecontrol.collector import collect_garbage_for_a_service
from devicecontrol.config import Settings, SettingsError, load_settings
from devicecontrol.observability.logs import serve_logging_config


def say(line: str) -> None:
    """One line to ``serve`` (``ready``, or why not), whitespace folded."""
    sys.stdout.write(" ".join(line.split()) + "\n")
    sys.stdout.flush()


def run_helper(run: Callable[[Settings], Coroutine[Any, Any, int]]) -> int:
    """``run(settings)`` with the settings of the environment (a bad one is the first
    line), logging set up, and the garbage collector set for a service; its exit status."""
    try:
        settings = load_settings()
    except SettingsError as exc:
        say(str(exc))
        return 1
    logging.config.dictConfig(serve_logging_config(settings.log_level, settings.log_format))
    collect_garbage_for_a_service()
    return asyncio.run(run(settings))
