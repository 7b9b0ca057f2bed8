"""One benchmark run: for each backend and fleet size, provision once; for each worker
count, start the service and, per scenario, its ceiling and the comparison servers that
answer it; alternate wrk between them."""

from __future__ import annotations

import asyncio
import http.client
import os
import statistics
import subprocess
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import comparisons, profiler, report, same_bytes, scenarios, servers, wrk
from bench.argon2cost import Argon2Cost
from bench.capture import capture
from bench.comparisons import Comparison
from bench.databases import throwaway_database
from bench.fleet import Fleet
from bench.provision import provision
from bench.report import SERVICE, Row
from bench.scenarios import STORM, Scenario

STORM_LEAD_S = 1  # the login storm starts this long before the reads and ends after them


@dataclass(frozen=True, slots=True)
class Options:
    backends: tuple[str, ...]
    workers: tuple[int, ...]
    fleets: tuple[int, ...]
    scenarios: tuple[str, ...]
    duration_s: int
    warmup_s: int
    rounds: int
    connections: int
    threads: int
    token_cache_ms: int | None
    profile: bool
    postgresql_url: str
    output: Path
    comparisons: bool = True


@dataclass(frozen=True, slots=True)
class Config:
    backend: str
    workers: int
    fleet: int
    database_url: str


@dataclass(frozen=True, slots=True)
class Contender:
    """A server measured against the ceiling: the service or a comparison app."""

    server: str  # the table's label
    port: int


def _load_average() -> list[float]:
    """1, 5 and 15 minute load averages; this run's own wrk and servers count in them."""
    return [round(value, 2) for value in os.getloadavg()]


def _median(results: list[wrk.WrkResult], key: Callable[[wrk.WrkResult], float]) -> float:
    return statistics.median(key(result) for result in results)


class Bench:
    """Holds the options, the output directory and the rows of one run."""

    def __init__(self, options: Options, argon2: Argon2Cost, log: Callable[[str], None]) -> None:
        self.options = options
        self.argon2 = argon2
        self.log = log
        self.rows: list[Row] = []
        self.service_pid = 0
        self.provisioning: list[dict[str, Any]] = []
        self.load: list[dict[str, Any]] = []

    def wrk(self, script: Path, port: int, duration_s: int, connections: int) -> wrk.WrkResult:
        argv = wrk.command(
            script,
            port,
            duration_s=duration_s,
            connections=connections,
            threads=self.options.threads,
        )
        return wrk.run(argv, duration_s)

    def run(self) -> list[Row]:
        if self.options.comparisons:
            for comparison in comparisons.COMPARISONS:
                missing = comparison.missing()
                if missing is not None:
                    self.log(f"{comparison.label}: not measured: {missing} is not installed "
                             f"({comparisons.INSTALL_HINT})")  # fmt: skip
        for backend in self.options.backends:
            for fleet_size in self.options.fleets:
                self.run_fleet(backend, Fleet(fleet_size))
        return self.rows

    def run_fleet(self, backend: str, fleet: Fleet) -> None:
        with throwaway_database(backend, fleet.controllers, self.options.postgresql_url) as url:
            self.log(f"provisioning {backend}: {fleet.controllers:,} controllers, "
                     f"{fleet.users:,} users ...")  # fmt: skip
            fixture = asyncio.run(provision(url, fleet))
            self.log(f"  provisioned in {fixture.seconds:.1f} s")
            self.provisioning.append(
                {"backend": backend, "fleet": fleet.controllers, "users": fleet.users,
                 "seconds": round(fixture.seconds, 1)}
            )  # fmt: skip
            built = scenarios.build(fixture)
            for workers in self.options.workers:
                self.run_config(Config(backend, workers, fleet.controllers, url), built)

    def run_config(self, config: Config, built: dict[str, Scenario]) -> None:
        directory = self.options.output / f"{config.backend}-w{config.workers}-f{config.fleet}"
        directory.mkdir(parents=True, exist_ok=True)
        port = servers.free_port()
        argv = servers.service_command(port, config.workers, config.database_url)
        load_before = _load_average()
        env = servers.service_env(self.options.token_cache_ms)
        with (
            (directory / "service.log").open("wb") as log,
            servers.running(argv, port, log, env) as service,
        ):
            self.service_pid = service.pid
            for name in self.options.scenarios:
                self.log(f"  {config.backend} w{config.workers} {config.fleet:,}: {name}")
                scenario = built[name]
                if name == STORM:
                    rows = [self.run_storm(config, port, scenario, built["login"], directory)]
                else:
                    rows = self.run_scenario(config, port, scenario, directory)
                self.rows.extend(rows)
                for line in report.text_table(rows).splitlines()[1:]:
                    self.log("    " + line)
        self.load.append(
            {"backend": config.backend, "workers": config.workers, "fleet": config.fleet,
             "loadavg_before": load_before, "loadavg_after": _load_average()}
        )  # fmt: skip

    def connections_for(self, scenario: Scenario) -> int:
        return scenario.connections or self.options.connections

    def run_scenario(
        self, config: Config, port: int, scenario: Scenario, directory: Path
    ) -> list[Row]:
        """Ceiling, service and comparisons in turn, ``rounds`` times each after a warm-up."""
        options = self.options
        script = wrk.write_script(scenario.requests, directory / f"{scenario.name}.lua")
        response_file = directory / f"{scenario.name}.response.json"
        size = capture(port, scenario.requests[0], response_file)
        connections = self.connections_for(scenario)
        contenders = [Contender(SERVICE, port)]
        not_run: list[Row] = []
        with ExitStack() as stack:
            ceiling_port = self.start(
                stack,
                lambda p: servers.ceiling_command(p, config.workers),
                directory / f"ceiling-{scenario.name}.log",
                servers.ceiling_env(response_file),
            )
            for comparison in self.comparisons_for(scenario):
                started = self.start_comparison(stack, comparison, config, port, scenario,
                                                response_file, directory)  # fmt: skip
                if isinstance(started, Contender):
                    contenders.append(started)
                else:
                    not_run.append(self.not_run(config, scenario, comparison.label, started))
            ceiling_runs, runs = self.alternate(script, ceiling_port, contenders, connections)
        if options.profile:
            self.profile(script, port, connections, directory / f"{scenario.name}.svg")
        note = f"{size} B body, {connections} conn"
        if scenario.name == "login":
            note += (f"; argon2 verify {self.argon2.verify_ms:.0f} ms, "
                     f"hash {self.argon2.hash_ms:.0f} ms in-process")  # fmt: skip
        ceiling_rate = _median(ceiling_runs, lambda r: r.rate)
        rows = [
            self.measured(config, scenario, server, server_runs, ceiling_rate,
                          note if server == SERVICE else "same bytes as the service")
            for server, server_runs in runs.items()
        ]  # fmt: skip
        order = [SERVICE, *(comparison.label for comparison in self.comparisons_for(scenario))]
        return sorted(rows + not_run, key=lambda row: order.index(row.server))

    def alternate(
        self, script: Path, ceiling_port: int, contenders: list[Contender], connections: int
    ) -> tuple[list[wrk.WrkResult], dict[str, list[wrk.WrkResult]]]:
        """Warm every server up, then run the ceiling and each contender in turn, ``rounds``
        times; the ceiling's runs and each contender's, by its label."""
        options = self.options
        if options.warmup_s:
            for warm_port in [ceiling_port, *(contender.port for contender in contenders)]:
                self.wrk(script, warm_port, options.warmup_s, connections)
        ceiling_runs: list[wrk.WrkResult] = []
        runs: dict[str, list[wrk.WrkResult]] = {contender.server: [] for contender in contenders}
        for _ in range(options.rounds):
            ceiling_runs.append(self.wrk(script, ceiling_port, options.duration_s, connections))
            for contender in contenders:
                runs[contender.server].append(
                    self.wrk(script, contender.port, options.duration_s, connections)
                )
        return ceiling_runs, runs

    def comparisons_for(self, scenario: Scenario) -> list[Comparison]:
        return comparisons.for_scenario(scenario.name) if self.options.comparisons else []

    @staticmethod
    def start(
        stack: ExitStack, command: Callable[[int], list[str]], log_path: Path, env: dict[str, str]
    ) -> int:
        """Start one bench app on a free port (stopped when ``stack`` closes); its port."""
        port = servers.free_port()
        log = stack.enter_context(log_path.open("wb"))
        stack.enter_context(servers.running(command(port), port, log, env))
        return port

    def start_comparison(
        self,
        stack: ExitStack,
        comparison: Comparison,
        config: Config,
        service_port: int,
        scenario: Scenario,
        response_file: Path,
        directory: Path,
    ) -> Contender | str:
        """Start a comparison and check its answers against the service's: the contender
        (stopped when ``stack`` closes), or why it is not measured (stopped at once)."""
        reason = comparison.why_not(config.backend)
        if reason is not None:
            return reason
        log_path = directory / f"{comparison.module}-{scenario.name}.log"
        env = servers.comparison_env(comparison.variable, comparison.env_value(config.database_url))
        with ExitStack() as own:
            try:
                port = self.start(
                    own,
                    lambda p: servers.bench_app_command(comparison.module, p, config.workers),
                    log_path,
                    env,
                )
                same_bytes.check(port, service_port, response_file, scenario.requests)
            except same_bytes.Mismatch as mismatch:
                self.log(f"    {comparison.label}: not measured, its answer differs: {mismatch}")
                return f"not measured: answer differs from the service's: {mismatch}"[:300]
            except (RuntimeError, OSError, http.client.HTTPException) as error:
                self.log(f"    {comparison.label}: not measured: {error} ({log_path})")
                return f"not measured: {error} ({log_path.name})"[:300]
            stack.enter_context(own.pop_all())  # keeps running until the scenario ends
        return Contender(comparison.label, port)

    def measured(
        self,
        config: Config,
        scenario: Scenario,
        server: str,
        runs: list[wrk.WrkResult],
        ceiling_rate: float,
        note: str,
    ) -> Row:
        return Row(
            scenario=scenario.name,
            server=server,
            backend=config.backend,
            workers=config.workers,
            fleet=config.fleet,
            rate=_median(runs, lambda r: r.rate),
            p50_ms=_median(runs, lambda r: r.p50_ms),
            p99_ms=_median(runs, lambda r: r.p99_ms),
            errors=sum(r.errors for r in runs),
            ceiling_rate=ceiling_rate,
            note=note,
        )

    def not_run(self, config: Config, scenario: Scenario, server: str, reason: str) -> Row:
        return Row(
            scenario=scenario.name,
            server=server,
            backend=config.backend,
            workers=config.workers,
            fleet=config.fleet,
            rate=None,
            p50_ms=None,
            p99_ms=None,
            errors=None,
            ceiling_rate=None,
            note=reason,
        )

    def profile(self, script: Path, port: int, connections: int, destination: Path) -> None:
        """One more service run under py-spy; its numbers are not reported."""
        duration_s = self.options.duration_s
        recorders = profiler.start(self.service_pid, duration_s, destination)
        try:
            self.wrk(script, port, duration_s, connections)
        finally:
            profiler.finish(recorders, duration_s)
        self.log(f"    profile: {destination} (and .txt)")

    def run_storm(
        self, config: Config, port: int, reads: Scenario, logins: Scenario, directory: Path
    ) -> Row:
        """Reads alone (calm), then the same reads beside a login wrk, ``rounds`` times."""
        options = self.options
        read_script = wrk.write_script(reads.requests, directory / "storm-reads.lua")
        login_script = wrk.write_script(logins.requests, directory / "storm-logins.lua")
        connections = self.connections_for(reads)
        storm_s = options.duration_s + 2 * STORM_LEAD_S
        login_argv = wrk.command(
            login_script,
            port,
            duration_s=storm_s,
            connections=self.connections_for(logins),
            threads=1,
        )
        calm_runs, storm_runs, login_runs = [], [], []
        if options.warmup_s:
            self.wrk(read_script, port, options.warmup_s, connections)
        for _ in range(options.rounds):
            calm_runs.append(self.wrk(read_script, port, options.duration_s, connections))
            storm = wrk.start(login_argv)
            try:
                time.sleep(STORM_LEAD_S)
                storm_runs.append(self.wrk(read_script, port, options.duration_s, connections))
            finally:
                try:
                    login_runs.append(wrk.finish(storm, storm_s))
                except subprocess.TimeoutExpired:
                    storm.kill()
                    raise
        calm_p99 = _median(calm_runs, lambda r: r.p99_ms)
        storm_p99 = _median(storm_runs, lambda r: r.p99_ms)
        calm_rate = _median(calm_runs, lambda r: r.rate)
        note = (
            f"calm {calm_rate:,.0f} req/s p99 {calm_p99:.2f} ms -> storm p99 {storm_p99:.2f} ms "
            f"(x{storm_p99 / calm_p99:.2f}); logins {_median(login_runs, lambda r: r.rate):.1f}/s, "
            f"{sum(r.errors for r in login_runs)} login errors"
        )
        return Row(
            scenario=STORM,
            backend=config.backend,
            workers=config.workers,
            fleet=config.fleet,
            rate=_median(storm_runs, lambda r: r.rate),
            p50_ms=_median(storm_runs, lambda r: r.p50_ms),
            p99_ms=storm_p99,
            errors=sum(r.errors for r in storm_runs),
            ceiling_rate=None,
            note=note,
        )
