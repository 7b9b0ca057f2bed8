"""devicecontrol serve: migrate, optionally fill demo data, then run uvicorn."""

from __future__ import annotations

import os

import click

from devicecontrol import demo as demo_data
from devicecontrol.cli.core import build_runtime, database_option, run_with_database
from devicecontrol.cli.demo import fill_if_empty
from devicecontrol.cli.graceful import GRACEFUL_TIMEOUT_S, run_uvicorn
from devicecontrol.config import LOG_FORMATS
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
@click.option("--log-format", type=click.Choice(LOG_FORMATS), default=None,
              help="json or text  [default: DEVICECONTROL_LOG_FORMAT, else json]")  # fmt: skip
@database_option
def serve(
    host: str,
    port: int,
    workers: int,
    graceful_timeout: int,
    demo: bool,
    log_format: str | None,
    database_url: str | None,
) -> None:
    """Run the HTTP service (schema migrations run first)."""
    settings = build_runtime(database_url).settings
    log_format = log_format or settings.log_format

    async def prepare(runtime: Runtime) -> bool:
        return await fill_if_empty(runtime) if demo else False

    filled = run_with_database(settings.database_url, prepare)
    if demo:
        if not filled:
            click.echo("The database is not empty: demo data not added.", err=True)
        click.echo(demo_data.walkthrough(f"http://{host}:{port}", added=filled))
    # worker processes read their settings from the environment
    os.environ["DEVICECONTROL_DATABASE_URL"] = settings.database_url
    os.environ["DEVICECONTROL_LOG_FORMAT"] = log_format
    with shared_metrics_directory(workers):  # /metrics sums the workers' values
        # SIGTERM: refuse new connections, finish the requests in flight, exit 0
        run_uvicorn(
            "devicecontrol.app:create_app_from_environment",
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
