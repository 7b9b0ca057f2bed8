"""The import's progress bar: on stderr, and only when stderr is a terminal.

Captured or piped stderr (scripts, CI, the tests) then holds exactly the report: one line
per bad row and the summary, with no bar frames or control codes among them.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from devicecontrol.controllers.csvfile import count_lines


@contextmanager
def file_progress(description: str, path: Path) -> Iterator[Callable[[int], None] | None]:
    """A callback taking the line number reached, or None when no bar is shown."""
    if not sys.stderr.isatty():
        yield None
        return
    total = count_lines(path)
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("lines"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=Console(stderr=True), transient=True) as progress:
        task = progress.add_task(description, total=total)

        def reached(line: int) -> None:
            progress.update(task, completed=line)

        yield reached
