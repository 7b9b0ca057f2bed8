"""The Prometheus metrics of the service, summed over all its worker processes.

With ``serve --workers N`` (N > 1) each worker is a process of its own. ``serve`` then points
``PROMETHEUS_MULTIPROC_DIR`` at a private directory before the workers start, and
prometheus_client keeps every value in a memory-mapped file per process there; whichever
worker answers ``GET /metrics`` reads them all (``exposition``). With one process the values
live in memory, and the default registry also reports the process's CPU and memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import Any

from prometheus_client import (
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
    multiprocess,
)
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from devicecontrol.background import in_background
from devicecontrol.database.engine import Database

MULTIPROC_DIR_VARIABLE = "PROMETHEUS_MULTIPROC_DIR"
# read when prometheus_client is imported, as prometheus_client itself does
MULTIPROC_DIR = os.environ.get(MULTIPROC_DIR_VARIABLE) or None
# the text format every Prometheus version reads (Litestar adds "; charset=utf-8")
MEDIA_TYPE = "text/plain; version=0.0.4"
POOL_SAMPLE_INTERVAL_S = 1.0
# request latencies: a token check or a read takes about a millisecond, argon2 logins ~50 ms
LATENCY_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
CONTROLLER_OPERATIONS = frozenset({"assign", "reassign", "release"})

disable_created_metrics()  # the *_created series double the output and no dashboard uses them

REQUESTS = Counter(
    "devicecontrol_http_requests",
    "HTTP requests answered, by route template, method and status.",
    ["route", "method", "status"],
)
REQUEST_DURATION = Histogram(
    "devicecontrol_http_request_duration_seconds",
    "Time from a request's arrival to the end of its answer, by route template and method.",
    ["route", "method"],
    buckets=LATENCY_BUCKETS_S,
)
LOGINS = Counter(
    "devicecontrol_logins",
    "Password logins (POST /auth/login) by outcome: success, failure (refused), error.",
    ["outcome"],
)
THROTTLED = Counter(
    "devicecontrol_throttled_requests",
    "Requests refused with 429 because of too many failures, by what: logins or claims.",
    ["what"],
)
OPERATIONS = Counter(
    "devicecontrol_controller_operations",
    "Assign, reassign and release requests, by operation and outcome.",
    ["operation", "outcome"],
)
POOL_CHECKED_OUT = Gauge(
    "devicecontrol_db_pool_checked_out",
    "Database connections in use, by pool (read, write), over all processes.",
    ["pool"],
    multiprocess_mode="livesum",
)
POOL_SIZE = Gauge(
    "devicecontrol_db_pool_size",
    "Database connections each pool keeps open, over all processes.",
    ["pool"],
    multiprocess_mode="livesum",
)
# the device link (devices/link.py), which runs in a process of its own under ``serve``
DEVICES_CONNECTED = Gauge(
    "devicecontrol_devices_connected",
    "Devices with a live connection to the embedded MQTT broker.",
    multiprocess_mode="livesum",
)
DEVICE_SOCKETS_OPEN = Gauge(
    "devicecontrol_device_sockets_open",
    "Sockets of devices the embedded MQTT broker holds open (proved or not yet).",
    multiprocess_mode="livesum",
)
DEVICE_SOCKETS_CAPACITY = Gauge(
    "devicecontrol_device_sockets_capacity",
    "How many device sockets the embedded MQTT broker may hold: its open files limit "
    "less what the link keeps for itself; a device past it is refused.",
    multiprocess_mode="livemax",
)
# the live events (events/): open streams, what they sent, and why they ended
EVENT_STREAMS_OPEN = Gauge(
    "devicecontrol_event_streams_open",
    "Event streams (GET .../events) open now.",
    multiprocess_mode="livesum",
)
EVENTS_SENT = Counter(
    "devicecontrol_events_sent",
    "Events sent on the streams, by type: online, reading, command, end, gap.",
    ["type"],
)
EVENT_STREAMS_CLOSED = Counter(
    "devicecontrol_event_streams_closed",
    "Event streams ended, by reason: client_closed, token_expired, token_revoked, "
    "slow_reader, controller_lost, shutdown.",
    ["reason"],
)
DEVICE_MESSAGES = Counter(
    "devicecontrol_device_messages",
    "Device messages received on the device's own topics, by kind: state, result.",
    ["kind"],
)
DEVICE_MESSAGES_DROPPED = Counter(
    "devicecontrol_device_messages_dropped",
    "Device messages dropped, by reason: not_json, not_an_object, too_large, rate_limited, "
    "forbidden_topic, unknown_command, late_result, malformed.",
    ["reason"],
)
DEVICE_FIELDS_DROPPED = Counter(
    "devicecontrol_device_fields_dropped",
    "Field names left out of stored readings: past their controller's limit of distinct "
    "field names (the rest of each reading is stored).",
)
DEVICE_INGEST_QUEUED = Gauge(
    "devicecontrol_device_ingest_queued",
    "Device messages accepted and waiting for the database (unacknowledged).",
    multiprocess_mode="livesum",
)
DEVICE_INGEST_FAILING = Gauge(
    "devicecontrol_device_ingest_failing",
    "1 while the device link cannot store device messages (they, and the devices, wait).",
    multiprocess_mode="livemax",
)
DEVICE_CONNECTIONS_CLOSED = Counter(
    "devicecontrol_device_connections_closed",
    "Device connections the embedded broker closed for a packet that broke a limit, or "
    "refused at its open files limit, by reason: packet_too_large, malformed_packet, "
    "unfinished_qos2, no_connect, file_limit.",
    ["reason"],
)
COMMAND_TRANSITIONS = Counter(
    "devicecontrol_command_transitions",
    "Commands whose stored status changed, by the new status: sent, succeeded, failed, expired.",
    ["status"],
)
COMMAND_ROUND_TRIP = Histogram(
    "devicecontrol_command_round_trip_seconds",
    "Time from the publication of a command to the device's result.",
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0),
)

# schedules (contract §12, schedules/runner.py): counted by the process that claimed them
SCHEDULE_FIRINGS = Counter(
    "devicecontrol_schedule_firings",
    "Schedule firings that made their command, by kind: start (at from_time), end (at to_time).",
    ["kind"],
)
SCHEDULE_SKIPS = Counter(
    "devicecontrol_schedule_skips",
    "Schedule firings skipped, by reason: late (missed by more than DEVICECONTROL_SCHEDULE_"
    "GRACE while no process ran), too_many_commands (the controller had 100 unfinished), "
    "not_owned (handed over as it fired, or the owner's account is disabled).",
    ["reason"],
)


class RequestMetrics:
    """The request counter and histogram children, looked up once per label combination.

    ``labels()`` converts and locks on every call; a dict hit is all a request pays here.
    """

    def __init__(self) -> None:
        self._children: dict[tuple[str, str, int], tuple[Counter, Histogram]] = {}

    def observe(self, route: str, method: str, status: int, seconds: float) -> None:
        key = (route, method, status)
        children = self._children.get(key)
        if children is None:
            children = (
                REQUESTS.labels(route, method, str(status)),
                REQUEST_DURATION.labels(route, method),
            )
            self._children[key] = children
        children[0].inc()
        children[1].observe(seconds)


REQUEST_METRICS = RequestMetrics()


def count_audited(event: str, outcome: str) -> None:
    """Count an audited action (audit.py): logins and controller operations have metrics."""
    if event == "login":
        LOGINS.labels(outcome).inc()
    elif event in CONTROLLER_OPERATIONS:
        OPERATIONS.labels(event, outcome).inc()


def sample_pools(database: Database) -> None:
    for pool, (checked_out, size) in database.pool_usage().items():
        POOL_CHECKED_OUT.labels(pool).set(checked_out)
        POOL_SIZE.labels(pool).set(size)


# with one HTTP process (values in memory), the device link's process writes its values here
_link_directory: str | None = None


class _Summed:
    """The families of several collectors as one, equal samples (name and labels) summed:
    what prometheus_client does with the processes of a multiprocess directory."""

    def __init__(self, *collectors: Collector) -> None:
        self._collectors = collectors

    def collect(self) -> Iterable[Metric]:
        families: dict[str, Metric] = {}
        values: dict[str, dict[tuple[str, frozenset[tuple[str, str]]], Any]] = {}
        for collector in self._collectors:
            for family in collector.collect():
                merged = families.setdefault(family.name, family)
                samples = values.setdefault(family.name, {})
                for sample in family.samples:
                    key = (sample.name, frozenset(sample.labels.items()))
                    known = samples.get(key)
                    samples[key] = (
                        sample
                        if known is None
                        else known._replace(value=known.value + sample.value)
                    )
                merged.samples = list(samples.values())
        return families.values()


def exposition(database: Database) -> bytes:
    """The text GET /metrics answers: this process's pools sampled now, then every value."""
    sample_pools(database)
    if MULTIPROC_DIR is not None:
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry, path=MULTIPROC_DIR)
        return generate_latest(registry)
    if _link_directory is None:
        return generate_latest(REGISTRY)
    link = multiprocess.MultiProcessCollector(None, path=_link_directory)
    return generate_latest(_Summed(REGISTRY, link))


@contextlib.contextmanager
def shared_metrics_directory(workers: int) -> Iterator[str]:
    """A fresh private directory for the values of ``serve``'s other processes; yields it.

    The device link always runs in a process of its own and writes there (its environment
    names the directory). With ``--workers N`` (N > 1) the workers do too: the variable is
    set before uvicorn starts them (each imports prometheus_client afresh and reads it
    then). With one worker, this process keeps its values in memory and adds the link's
    when scraped. The directory is removed when ``serve`` ends: counters start at zero with
    each start of the service.
    """
    global _link_directory
    directory = tempfile.mkdtemp(prefix="devicecontrol-metrics-")
    previous = os.environ.get(MULTIPROC_DIR_VARIABLE)
    if workers > 1:
        os.environ[MULTIPROC_DIR_VARIABLE] = directory
    else:
        _link_directory = directory
    try:
        yield directory
    finally:
        _link_directory = None
        shutil.rmtree(directory, ignore_errors=True)
        if previous is None:
            os.environ.pop(MULTIPROC_DIR_VARIABLE, None)
        else:
            os.environ[MULTIPROC_DIR_VARIABLE] = previous


async def _sample_pools_periodically(database: Database) -> None:
    while True:
        sample_pools(database)
        await asyncio.sleep(POOL_SAMPLE_INTERVAL_S)


@contextlib.asynccontextmanager
async def pool_sampling(database: Database) -> AsyncIterator[None]:
    """With several processes, each keeps its pool gauges fresh for whichever one is scraped.

    On shutdown the process's gauges are removed, so a stopped worker's pools stop counting.
    """
    if MULTIPROC_DIR is None:
        yield
        return
    try:
        async with in_background(_sample_pools_periodically(database)):
            yield
    finally:
        mark_this_process_dead()


def mark_this_process_dead() -> None:
    """This process's live gauges stop counting in the shared metrics directory."""
    if MULTIPROC_DIR is not None:
        multiprocess.mark_process_dead(os.getpid(), MULTIPROC_DIR)
