"""GET /metrics counts what happened: by route template, logins, 429s, ownership, pools."""

from __future__ import annotations

from dataclasses import replace

import httpx
from sqlalchemy import select

from devicecontrol.config import Settings, ThrottleRule
from devicecontrol.database import engine as db
from devicecontrol.database.hot_pool import HOT_POOL_SIZE
from tests.apps import lent_client
from tests.asgi import app_and_client
from tests.factories import (
    CLIENT_ID,
    CLIENT_SECRET,
    logged_in_user,
    login,
    make_client,
    make_controller,
    make_user,
)
from tests.observability.scrape import Samples, parse, value

REQUESTS = "devicecontrol_http_requests_total"
DURATION_COUNT = "devicecontrol_http_request_duration_seconds_count"
LOGINS = "devicecontrol_logins_total"
THROTTLED = "devicecontrol_throttled_requests_total"
OPERATIONS = "devicecontrol_controller_operations_total"
SERIAL_ROUTE = "/v1/controllers/{serial_number}"


async def scrape(client: httpx.AsyncClient) -> Samples:
    response = await client.get("/metrics")
    assert response.status_code == 200, response.text
    return parse(response.text)


def grew(before: Samples, after: Samples, name: str, **labels: str) -> float:
    return value(after, name, **labels) - value(before, name, **labels)


async def wrong_login(client: httpx.AsyncClient, **fields: str) -> httpx.Response:
    body = {
        "client_id": CLIENT_ID,
        "client_secret": CLIENT_SECRET,
        "username": "ana@example.com",
        "password": "not the password",
        **fields,
    }
    return await client.post("/v1/auth/login", json=body)


async def test_a_404_is_counted_under_its_route_template_method_and_status(runtime, client):
    _, headers = await logged_in_user(runtime, client)
    before = await scrape(client)
    assert (await client.get("/v1/controllers/NO-SUCH-1", headers=headers)).status_code == 404
    after = await scrape(client)
    assert grew(before, after, REQUESTS, route=SERIAL_ROUTE, method="GET", status="404") == 1
    assert grew(before, after, DURATION_COUNT, route=SERIAL_ROUTE, method="GET") == 1
    assert not [labels for _, labels in after if ("route", "/v1/controllers/NO-SUCH-1") in labels]


async def test_paths_that_match_no_route_are_counted_as_unmatched_not_by_path(client):
    before = await scrape(client)
    assert (await client.get("/no/such/path-7Q")).status_code == 404
    assert (await client.delete("/v1/users/me")).status_code == 405
    after = await scrape(client)
    assert grew(before, after, REQUESTS, route="<unmatched>", method="GET", status="404") == 1
    assert grew(before, after, REQUESTS, route="<unmatched>", method="DELETE", status="405") == 1
    assert "path-7Q" not in (await client.get("/metrics")).text


async def test_a_success_and_the_unprefixed_twin_are_separate_routes(runtime, client):
    _, headers = await logged_in_user(runtime, client)
    before = await scrape(client)
    assert (await client.get("/v1/users/me", headers=headers)).status_code == 200
    assert (await client.get("/users/me", headers=headers)).status_code == 200
    after = await scrape(client)
    assert grew(before, after, REQUESTS, route="/v1/users/me", method="GET", status="200") == 1
    assert grew(before, after, REQUESTS, route="/users/me", method="GET", status="200") == 1


async def test_logins_are_counted_by_outcome(runtime, client):
    await make_client(runtime)
    await make_user(runtime)
    before = await scrape(client)
    assert (await wrong_login(client)).status_code == 400
    assert (await wrong_login(client, client_secret="wrong-secret-000000")).status_code == 401
    await login(client)
    after = await scrape(client)
    assert grew(before, after, LOGINS, outcome="failure") == 2
    assert grew(before, after, LOGINS, outcome="success") == 1


async def test_throttled_requests_are_counted_with_what_was_throttled(settings, runtime):
    await make_client(runtime)
    await make_user(runtime)
    strict = replace(settings, throttle_login_per_username=ThrottleRule(1, 900))
    async with lent_client(strict) as client:
        before = await scrape(client)
        assert (await wrong_login(client)).status_code == 400
        assert (await wrong_login(client)).status_code == 429
        after = await scrape(client)
    assert grew(before, after, THROTTLED, what="logins") == 1
    assert grew(before, after, REQUESTS, route="/v1/auth/login", method="POST", status="429") == 1
    assert grew(before, after, LOGINS, outcome="failure") == 2


async def test_assign_reassign_and_release_are_counted_by_outcome(runtime, client):
    _, headers = await logged_in_user(runtime, client)
    await make_user(runtime, "friend@example.com")
    await make_controller(runtime, "SN-M-1")
    await make_controller(runtime, "SN-M-2")
    await make_controller(runtime, "SN-M-3", claim_code="CLAIM-M-3")
    before = await scrape(client)
    serial = "/v1/controllers/{}"
    assert (await client.post(serial.format("SN-M-1/assign"), headers=headers)).status_code == 200
    assert (await client.post(serial.format("SN-M-2/assign"), headers=headers)).status_code == 200
    assert (await client.post(serial.format("SN-M-3/assign"), headers=headers)).status_code == 403
    moved = await client.patch(
        serial.format("SN-M-1/reassign"), headers=headers, json={"owner": "friend@example.com"}
    )
    assert moved.status_code == 200, moved.text
    assert (await client.delete(serial.format("SN-M-2/assign"), headers=headers)).status_code == 200
    after = await scrape(client)
    assert grew(before, after, OPERATIONS, operation="assign", outcome="success") == 2
    assert grew(before, after, OPERATIONS, operation="assign", outcome="failure") == 1
    assert grew(before, after, OPERATIONS, operation="reassign", outcome="success") == 1
    assert grew(before, after, OPERATIONS, operation="release", outcome="success") == 1


async def test_pool_sizes_are_reported_for_the_read_and_the_write_pool(client, backend):
    samples = await scrape(client)
    if backend == "sqlite":
        expected = {"read": db.SQLITE_READ_POOL_SIZE, "write": db.SQLITE_WRITE_POOL[0]}
    else:
        expected = {
            "read": db.POSTGRES_READ_POOL[0],
            "write": db.POSTGRES_WRITE_POOL[0],
            "hot": HOT_POOL_SIZE,  # the hot statements' asyncpg pool (hot_pool.py)
        }
    for pool, size in expected.items():
        assert value(samples, "devicecontrol_db_pool_size", pool=pool) == size, pool
        # the scrape itself holds no connection
        assert value(samples, "devicecontrol_db_pool_checked_out", pool=pool) == 0, pool


async def test_connections_in_use_are_reported_per_pool(settings: Settings):
    async with app_and_client(settings) as (runtime, http):  # the test holds its connections
        async with runtime.database.read() as reader, runtime.database.write():
            await reader.execute(select(1))  # a reader checks out its connection on first use
            busy = await scrape(http)
        idle = await scrape(http)
    for pool in ("read", "write"):
        assert value(busy, "devicecontrol_db_pool_checked_out", pool=pool) == 1, pool
        assert value(idle, "devicecontrol_db_pool_checked_out", pool=pool) == 0, pool
