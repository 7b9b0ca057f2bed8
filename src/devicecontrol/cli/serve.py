"""devicecontrol serve: migrate, optionally fill demo data, then run uvicorn."""

from __future__ import annotations

import os
import subprocess
import sys
from functools import partial

import click

from devicecontrol.cli.core import (
    OperatorError,
    build_runtime,
    database_option,
    run_with_database,
)
from devicecontrol.cli.demo import fill_if_empty
from devicecontrol.cli.graceful import GRACEFUL_TIMEOUT_S, run_uvicorn
from devicecontrol.config import LOG_FORMATS
from devicecontrol.demo import data as demo_data
from devicecontrol.devices.link.ports import LinkError
from devicecontrol.devices.link.supervisor import HOOK_MODULE, LINK_MODULE, HelperProcess
from devicecontrol.observability.logs import serve_logging_config
from devicecontrol.observability.metrics import shared_metrics_directory
from devicecontrol.runtime import Runtime


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535))
@click.option("--workers", default=1, show_default=True, type=click.IntRange(1, 64),
              help="Server processes sharing the database.")  # fmt: skip
@click.option("--graceful-timeout", default=GRACEFUL_TIMEOUT_S, show_default=True,
              type=click.IntRange(1, 3600), metavar="SECONDS",
              help="After SIGTERM, how long requests in flight may take to finish.")  # fmt: skip
@click.option("--demo", is_flag=True, help="Fill an empty database with demo data first.")
@click.option("--device-link/--no-device-link", default=True, show_default=True,
              help="Run the device link: the embedded MQTT broker, or the client of "
                   "DEVICECONTROL_MQTT_URL's broker (one per deployment).")  # fmt: skip
@click.option("--log-format", type=click.Choice(LOG_FORMATS), default=None,
              help="json or text  [default: DEVICECONTROL_LOG_FORMAT, else json]")  # fmt: skip
@database_option
def serve(
    host: str,
    port: int,
    workers: int,
    graceful_timeout: int,
    demo: bool,
    device_link: bool,
    log_format: str | None,
    database_url: str | None,
) -> None:
    """Run the HTTP service and the devices' MQTT broker (schema migrations run first)."""
    settings = build_runtime(database_url).settings
    log_format = log_format or settings.log_format

    async def prepare(runtime: Runtime) -> bool:
        return await fill_if_empty(runtime) if demo else False

    filled = run_with_database(settings.database_url, prepare)
    mqtt_port = int(settings.mqtt_listen.rpartition(":")[2])
    if demo:
        if not filled:
            click.echo("The database is not empty: demo data not added.", err=True)
        banner = demo_data.walkthrough(f"http://{host}:{port}", added=filled, mqtt_port=mqtt_port)
        click.echo(banner)
    # worker processes read their settings from the environment
    os.environ["DEVICECONTROL_DATABASE_URL"] = settings.database_url
    os.environ["DEVICECONTROL_LOG_FORMAT"] = log_format
    # /metrics sums the values of the workers and the device link
    with shared_metrics_directory(workers) as metrics_directory:
        # the hook first: a link on RabbitMQ logs in through it
        hook = (
            _start_helper(metrics_directory, HOOK_MODULE) if settings.broker_hook_listen else None
        )
        try:
            link = _start_helper(metrics_directory, LINK_MODULE) if device_link else None
        except OperatorError:
            if hook is not None:
                hook.stop()
            raise
        simulated = None
        if demo and link and settings.mqtt_url is None:
            simulated = _start_demo_devices(settings.mqtt_listen)
        elif demo and link:
            click.echo(
                "With DEVICECONTROL_MQTT_URL the demo's devices are not simulated: their "
                "accounts are not on that broker (add them with controllers rotate-secret).",
                err=True,
            )
        try:
            # SIGTERM: refuse new connections, finish the requests in flight, close the
            # device connections, exit 0
            run_uvicorn(
                "devicecontrol.app:create_app_from_environment",
                on_stop=partial(_terminate, link, hook),
                factory=True,
                host=host,
                port=port,
                workers=workers,
                timeout_graceful_shutdown=graceful_timeout,
                log_level=settings.log_level,
                # every line structured; the request log replaces uvicorn's access log
                log_config=serve_logging_config(settings.log_level, log_format),
                access_log=False,
                proxy_headers=False,
                server_header=False,
            )
        finally:
            if simulated is not None:
                _stop(simulated)
            if link is not None:
                link.stop()
            if hook is not None:
                hook.stop()


def _start_helper(metrics_directory: str, module: str) -> HelperProcess:
    """A helper process (the device link, the broker hook), listening (or connected to the
    external broker) before HTTP is; a taken port or an unreachable broker is a one-line
    error. One of each for all the workers."""
    try:
        return HelperProcess.start(metrics_directory, module)
    except LinkError as exc:
        raise OperatorError(str(exc)) from None


def _terminate(*helpers: HelperProcess | None) -> None:
    """Ask the helper processes to stop alongside HTTP (from the signal handler)."""
    for helper in helpers:
        if helper is not None:
            helper.terminate()


DEMO_READING_INTERVAL_S = 5


def _start_demo_devices(mqtt_listen: str) -> subprocess.Popen[bytes]:
    """The demo's devices, simulated (`devices simulate --demo`) in a process of their own:
    real MQTT clients of the broker, so the walk-through shows readings and commands."""
    return subprocess.Popen(  # noqa: S603 - this interpreter, our own module
        [sys.executable, "-m", "devicecontrol", "devices", "simulate", "--demo",
         "--broker", mqtt_listen, "--interval", str(DEMO_READING_INTERVAL_S)],
        stdin=subprocess.DEVNULL,
    )  # fmt: skip


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
