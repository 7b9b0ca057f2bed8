"""GET /healthz, /readyz and /metrics: for load balancers, orchestrators and Prometheus.

They need no token, answer only unprefixed (they are about this process, not the v1 API),
and stay out of the OpenAPI document, like /openapi.json: the document describes the API
that clients call, and the fuzzing of it (tests/e2e/test_schemathesis.py) covers exactly
that. docs/OPERATIONS.md describes them.
"""

from __future__ import annotations

from typing import Any

from litestar import Request, get
from litestar.datastructures import ResponseHeader
from litestar.di import NamedDependency
from sqlalchemy import text

from devicecontrol.observability.metrics import MEDIA_TYPE, exposition
from devicecontrol.runtime import Runtime

JSON = "application/json"
# a probe's answer is about this moment: nothing between here and the prober may keep it
NOT_STORED = [ResponseHeader(name="Cache-Control", value="no-store")]
PUBLIC = {"exclude_from_auth": True}
SELECT_ONE = text("SELECT 1")


@get(
    "/healthz",
    media_type=JSON,
    sync_to_thread=False,
    include_in_schema=False,
    response_headers=NOT_STORED,
    opt=PUBLIC,
)
def healthz() -> bytes:
    """The process is up and serving HTTP; the database is not asked (see /readyz)."""
    return b'{"status":"ok"}'


@get("/readyz", media_type=JSON, include_in_schema=False, response_headers=NOT_STORED, opt=PUBLIC)
async def readyz(runtime: NamedDependency[Runtime]) -> bytes:
    """One round trip to the database; when it fails, the app's outage answer (503) holds.

    The query's error goes to the app's one mapping (http/problems.py): an outage is 503
    problem+json with Retry-After, as on every other endpoint.
    """
    async with runtime.database.read() as connection:
        await connection.execute(SELECT_ONE)
    return b'{"status":"ready"}'


@get(
    "/metrics",
    media_type=MEDIA_TYPE,
    sync_to_thread=False,
    include_in_schema=False,
    response_headers=NOT_STORED,
    opt=PUBLIC,
)
def metrics(request: Request[Any, Any, Any]) -> bytes:
    """Prometheus text exposition of every worker process's metrics (metrics.py)."""
    return exposition(request.app.state.runtime.database)


OPERATIONAL_HANDLERS = [healthz, readyz, metrics]
