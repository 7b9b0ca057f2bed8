"""GET /healthz, /readyz and /metrics: no token, unprefixed only, out of the OpenAPI document."""

from __future__ import annotations

import pytest
from litestar.testing import AsyncTestClient

from devicecontrol.app import create_app
from devicecontrol.config import Settings
from tests.observability.scrape import parse
from tests.test_outage import UNREACHABLE

OPERATIONAL = ("/healthz", "/readyz", "/metrics")


async def test_healthz_is_200_without_a_token_even_when_the_database_is_unreachable():
    app = create_app(Settings(database_url=UNREACHABLE["postgresql"]))
    async with AsyncTestClient(app=app) as client:
        response = await client.get("/healthz")
    assert response.status_code == 200, response.text
    assert response.json() == {"status": "ok"}
    assert response.headers["content-type"].startswith("application/json")
    assert response.headers["cache-control"] == "no-store"


async def test_readyz_is_200_without_a_token_when_the_database_answers(client):
    response = await client.get("/readyz")
    assert response.status_code == 200, response.text
    assert response.json() == {"status": "ready"}
    assert response.headers["cache-control"] == "no-store"


@pytest.mark.parametrize("backend", sorted(UNREACHABLE))
async def test_readyz_is_503_problem_with_retry_after_when_the_database_is_unreachable(backend):
    app = create_app(Settings(database_url=UNREACHABLE[backend]))
    async with AsyncTestClient(app=app) as client:
        response = await client.get("/readyz")
    assert response.status_code == 503, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    assert response.headers["retry-after"].isdigit()
    assert response.json()["status"] == 503
    assert "Traceback" not in response.text and "SELECT" not in response.text


async def test_metrics_is_prometheus_text_without_a_token(client):
    response = await client.get("/metrics")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    assert "version=0.0.4" in response.headers["content-type"]
    names = {name for name, _ in parse(response.text)}
    for name in (
        "devicecontrol_http_requests_total",
        "devicecontrol_http_request_duration_seconds_bucket",
        "devicecontrol_db_pool_checked_out",
        "devicecontrol_db_pool_size",
    ):
        assert name in names, name


@pytest.mark.parametrize("path", OPERATIONAL)
async def test_the_operational_endpoints_answer_only_unprefixed(client, path):
    assert (await client.get(path)).status_code == 200
    assert (await client.get(f"/v1{path}")).status_code == 404


async def test_the_operational_endpoints_are_no_operations_of_the_openapi_document(client):
    paths = (await client.get("/openapi.json")).json()["paths"]
    names = {path.strip("/").removeprefix("v1/") for path in paths}
    assert not names & {"healthz", "readyz", "metrics"}, names


async def test_the_api_beside_them_still_needs_a_token(client):
    assert (await client.get("/v1/users/me")).status_code == 401
