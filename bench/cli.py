"""The command line: ``python -m bench [options]``; prints the table and writes results."""

from __future__ import annotations

import datetime
import os
import platform
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from bench import argon2cost, comparisons, profiler, report, wrk
from bench.databases import BACKENDS, DEFAULT_POSTGRESQL_URL
from bench.run import Bench, Options
from bench.scenarios import SCENARIO_NAMES

RESULTS_DIR = Path(__file__).resolve().parent / "results"


def _split(value: str) -> list[str]:
    return [item.strip() for item in value.split(",") if item.strip()]


def _positive_ints(_ctx: click.Context, _param: click.Parameter, value: str) -> tuple[int, ...]:
    try:
        numbers = tuple(int(item.replace("_", "")) for item in _split(value))
    except ValueError:
        raise click.BadParameter(f"{value!r}: comma-separated whole numbers") from None
    if not numbers or min(numbers) < 1:
        raise click.BadParameter(f"{value!r}: comma-separated positive numbers")
    return numbers


def _choices(allowed: tuple[str, ...]) -> Callable[..., tuple[str, ...]]:
    def check(_ctx: click.Context, _param: click.Parameter, value: str) -> tuple[str, ...]:
        chosen = tuple(allowed) if value == "all" else tuple(_split(value))
        unknown = [item for item in chosen if item not in allowed]
        if unknown or not chosen:
            raise click.BadParameter(f"{value!r}: choose from {', '.join(allowed)} or all")
        return chosen

    return check


def _backends(ctx: click.Context, param: click.Parameter, value: str) -> tuple[str, ...]:
    return _choices(BACKENDS)(ctx, param, "all" if value == "both" else value)


def _machine() -> str:
    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{os.cpu_count()} CPUs, {model}, Python {platform.python_version()}"


def _load() -> str:
    return ", ".join(f"{value:.2f}" for value in os.getloadavg())


@click.command()
@click.option(
    "--backend",
    "backends",
    default="sqlite",
    show_default=True,
    callback=_backends,
    help="sqlite, postgresql or both.",
)
@click.option(
    "--workers",
    default="1",
    show_default=True,
    callback=_positive_ints,
    help="Comma-separated worker counts, e.g. 1,2.",
)
@click.option(
    "--fleet",
    "fleets",
    default="1000",
    show_default=True,
    callback=_positive_ints,
    help="Comma-separated fleet sizes, e.g. 1000,100000.",
)
@click.option(
    "--scenarios",
    default="all",
    show_default=True,
    callback=_choices(SCENARIO_NAMES),
    help=f"Comma-separated: {', '.join(SCENARIO_NAMES)}.",
)
@click.option(
    "--duration",
    "duration_s",
    default=5,
    show_default=True,
    type=click.IntRange(1),
    help="Seconds per measured wrk run.",
)
@click.option(
    "--warmup",
    "warmup_s",
    default=2,
    show_default=True,
    type=click.IntRange(0),
    help="Seconds of warm-up per server and scenario.",
)
@click.option(
    "--rounds",
    default=3,
    show_default=True,
    type=click.IntRange(1),
    help="Alternating ceiling/service runs per scenario; the median is reported.",
)
@click.option(
    "--connections",
    default=32,
    show_default=True,
    type=click.IntRange(1),
    help="wrk connections (the login scenario uses fewer, see scenarios.py).",
)
@click.option(
    "--threads",
    default=1,
    show_default=True,
    type=click.IntRange(1),
    help="wrk threads (on 2 cores, one leaves the other to the server).",
)
@click.option(
    "--token-cache-ms",
    type=click.IntRange(0, 1000),
    default=None,
    help="DEVICECONTROL_TOKEN_CACHE_MS for the service (0 turns the cache off). "
    "[default: the service's own, 500]",
)
@click.option(
    "--profile",
    is_flag=True,
    help="Record the service with py-spy during its first measured run of each scenario "
    "(pip install py-spy): <scenario>.svg flame graph and .txt collapsed stacks.",
)
@click.option(
    "--comparisons/--no-comparisons",
    default=True,
    show_default=True,
    help="Also measure the comparison servers (bench/plain_app.py, bench/fastapi_app.py) in "
    "the scenarios they answer, after checking their bytes against the service's.",
)
@click.option(
    "--postgresql-url",
    default=DEFAULT_POSTGRESQL_URL,
    show_default=True,
    help="Admin URL; the run creates and drops its own database beside it.",
)
@click.option(
    "--output",
    type=click.Path(file_okay=False, path_type=Path),
    default=RESULTS_DIR,
    show_default=True,
    help="Where results, wrk scripts and server logs go (one directory per run).",
)
def main(output: Path, **values: Any) -> None:
    """Benchmark devicecontrol against the HTTP ceiling (and the comparison servers) with
    wrk and print one table."""
    try:
        wrk.wrk_path()
        if values["profile"]:
            profiler.py_spy_path()
    except (wrk.WrkMissing, profiler.PySpyMissing) as missing:
        click.echo(f"error: {missing}", err=True)
        sys.exit(1)
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    run_dir = output / stamp
    options = Options(output=run_dir, **values)

    def log(message: str) -> None:
        click.echo(message, err=True)

    started_load = _load()
    log(f"{_machine()}; load average {started_load}")
    argon2 = argon2cost.measure()
    log(f"argon2id in-process: hash {argon2.hash_ms:.1f} ms, verify {argon2.verify_ms:.1f} ms")
    bench = Bench(options, argon2, log)
    rows = bench.run()
    context = {
        "date": stamp,
        "machine": _machine(),
        "load average at start (1, 5, 15 min)": started_load,
        "load average at end (1, 5, 15 min)": _load(),
        "argon2id in-process": f"hash {argon2.hash_ms:.1f} ms, verify {argon2.verify_ms:.1f} ms",
        "provisioning": bench.provisioning,
        "load per configuration": bench.load,
        "token cache": "service default (500 ms)"
        if options.token_cache_ms is None
        else f"{options.token_cache_ms} ms",
        "comparison servers": comparisons.describe() if options.comparisons else "off",
        "wrk": f"{options.connections} connections, {options.threads} thread(s), "
        f"{options.rounds} x {options.duration_s} s per server after {options.warmup_s} s warm-up",
    }
    path = report.write(run_dir, "results", rows, context)
    click.echo(report.text_table(rows))
    log(f"results: {path} (and results.md)")
