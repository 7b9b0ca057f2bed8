"""What users read cites what users have: the README, docs/ and the CLI's help never send
them to the developers' contract (code comments may)."""

from __future__ import annotations

import re
from pathlib import Path

import click
from click.testing import CliRunner

from devicecontrol.cli import main

ROOT = Path(__file__).resolve().parents[1]
CONTRACT = re.compile(r"(?i)contract\s*(§|section)|§\s*\d")
RFC_SECTION = re.compile(r"RFC \d+ §\s*[\d.]+")
USERS_DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_the_readme_and_docs_cite_no_contract_section():
    for document in USERS_DOCUMENTS:
        for number, line in enumerate(document.read_text(encoding="utf-8").splitlines(), 1):
            cited = RFC_SECTION.sub("", line)  # an RFC's sections are everyone's
            assert not CONTRACT.search(cited), f"{document.name}:{number}: {line}"


def every_command_path(group: click.Group, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    paths = [path]
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            paths += every_command_path(command, (*path, name))
        else:
            paths.append((*path, name))
    return paths


def test_no_help_text_cites_the_contract():
    runner = CliRunner()
    for path in every_command_path(main):
        shown = runner.invoke(main, [*path, "--help"])
        assert shown.exit_code == 0, (path, shown.output)
        assert "contract" not in shown.output.lower(), (path, shown.output)
