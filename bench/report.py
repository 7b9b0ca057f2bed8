"""The table: printed as text, and written with the run's context as JSON and Markdown."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

SERVICE = "devicecontrol"  # the server column of the service's own rows

COLUMNS = (
    ("scenario", "scenario"),
    ("server", "server"),
    ("backend", "backend"),
    ("workers", "workers"),
    ("fleet", "fleet"),
    ("req/s", "rate"),
    ("p50 ms", "p50_ms"),
    ("p99 ms", "p99_ms"),
    ("errors", "errors"),
    ("ceiling req/s", "ceiling_rate"),
    ("ratio", "ratio"),
    ("note", "note"),
)


@dataclass(slots=True)
class Row:
    """One server in one scenario and configuration; a comparison that did not run has no
    numbers (None), and its note says why."""

    scenario: str
    backend: str
    workers: int
    fleet: int
    rate: float | None
    p50_ms: float | None
    p99_ms: float | None
    errors: int | None
    ceiling_rate: float | None
    note: str = ""
    server: str = SERVICE

    @property
    def ratio(self) -> float | None:
        if self.rate is None or not self.ceiling_rate:
            return None
        return self.rate / self.ceiling_rate


def _cell(row: Row, attribute: str) -> str:
    value = getattr(row, attribute)
    if value is None:
        return "-"
    if attribute in {"rate", "ceiling_rate"}:
        return f"{value:,.0f}"
    if attribute == "ratio":
        return f"{value:.3f}"
    if isinstance(value, float):
        return f"{value:.2f}"
    if attribute == "fleet":
        return f"{value:,}"
    return str(value)


def _cells(rows: list[Row]) -> list[list[str]]:
    return [[_cell(row, attribute) for _, attribute in COLUMNS] for row in rows]


def text_table(rows: list[Row]) -> str:
    header = [title for title, _ in COLUMNS]
    body = _cells(rows)
    widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True))
             for line in [header, *body]]  # fmt: skip
    return "\n".join(line.rstrip() for line in lines)


def markdown_table(rows: list[Row]) -> str:
    header = [title for title, _ in COLUMNS]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(line) + " |" for line in _cells(rows)]
    return "\n".join(lines)


def write(directory: Path, stem: str, rows: list[Row], context: dict[str, Any]) -> Path:
    """``<stem>.json`` (rows and context) and ``<stem>.md`` side by side; returns the JSON."""
    directory.mkdir(parents=True, exist_ok=True)
    data = {"context": context, "rows": [asdict(row) | {"ratio": row.ratio} for row in rows]}
    json_path = directory / f"{stem}.json"
    json_path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    context_lines = [f"- {key}: {value}" for key, value in context.items()]
    (directory / f"{stem}.md").write_text(
        "\n".join([*context_lines, "", markdown_table(rows), ""]), encoding="utf-8"
    )
    return json_path
