"""The README's command summary names every command and exactly the options each one has."""

from __future__ import annotations

import re
from pathlib import Path

import click

from devicecontrol.cli import main

README = Path(__file__).resolve().parents[2] / "README.md"
SUMMARY = re.compile(r"## The operators' command line\n.*?```sh\n(?P<block>.*?)```", re.DOTALL)
# said once, in the text above the summary, for every command that has it
COMMON = {"--database-url", "--help"}


def summary() -> dict[tuple[str, ...], str]:
    """Each command line of the summary (its continuation lines joined), by command path."""
    found = SUMMARY.search(README.read_text(encoding="utf-8"))
    assert found, "README.md lost its operators' command summary"
    commands: dict[tuple[str, ...], str] = {}
    current: tuple[str, ...] = ()
    for line in found["block"].splitlines():
        if line.startswith("devicecontrol "):
            words = line.split()[1:]
            group = main.commands.get(words[0])
            assert group is not None, line
            current = (words[0], words[1]) if isinstance(group, click.Group) else (words[0],)
            assert current not in commands, f"{current} is listed twice"
            commands[current] = line
        else:
            assert line.startswith(" ") and current, f"a line of no command: {line!r}"
            commands[current] += " " + line.strip()
    return commands


def cli_commands() -> dict[tuple[str, ...], click.Command]:
    commands: dict[tuple[str, ...], click.Command] = {}
    for name, command in main.commands.items():
        if isinstance(command, click.Group):
            commands.update({(name, sub): c for sub, c in command.commands.items()})
        else:
            commands[(name,)] = command
    return commands


def test_the_summary_lists_every_command_once():
    assert sorted(summary()) == sorted(cli_commands())


def test_each_summary_line_has_its_commands_options_and_no_other():
    commands = cli_commands()
    for path, line in summary().items():
        # a remark after the usage, as "(SQLite, online)", is not part of it
        usage = re.sub(r"\s{2,}\(.*\)$", "", line)
        listed = set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", usage))
        options = [p for p in commands[path].params if isinstance(p, click.Option)]
        real = {o for p in options for o in (*p.opts, *p.secondary_opts)}
        assert listed <= real, f"{' '.join(path)} has no {sorted(listed - real)}"
        for option in options:
            names = {*option.opts, *option.secondary_opts}
            if names & COMMON:
                continue
            assert names & listed, f"the summary of {' '.join(path)} lacks {option.opts[0]}"
