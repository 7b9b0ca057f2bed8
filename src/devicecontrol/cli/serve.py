"""devicecontrol serve: migrate, optionally fill demo data, then run uvicorn."""

from __future__ import annotations

import os

import click
import uvicorn

from devicecontrol import demo as demo_data
from devicecontrol.cli.core import build_runtime, database_option, run_with_database
from devicecontrol.cli.demo import fill_if_empty
from devicecontrol.runtime import Runtime


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535))
@click.option("--workers", default=1, show_default=True, type=click.IntRange(1, 64),
              help="Server processes sharing the database.")  # fmt: skip
@click.option("--demo", is_flag=True, help="Fill an empty database with demo data first.")
@database_option
def serve(host: str, port: int, workers: int, demo: bool, database_url: str | None) -> None:
    """Run the HTTP service (schema migrations run first)."""
    settings = build_runtime(database_url).settings

    async def prepare(runtime: Runtime) -> bool:
        return await fill_if_empty(runtime) if demo else False

    filled = run_with_database(settings.database_url, prepare)
    if demo:
        if not filled:
            click.echo("The database is not empty: demo data not added.", err=True)
        click.echo(demo_data.walkthrough(f"http://{host}:{port}"))
    # worker processes read their settings from the environment
    os.environ["DEVICECONTROL_DATABASE_URL"] = settings.database_url
    uvicorn.run(
        "devicecontrol.app:create_app_from_environment",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        log_level=settings.log_level,
        proxy_headers=False,
        server_header=False,
    )
