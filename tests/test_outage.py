"""A database that cannot be reached is 503 with Retry-After, never a 500 or a hang."""

from __future__ import annotations

import time

import pytest
from litestar.testing import AsyncTestClient

from devicecontrol.app import create_app
from devicecontrol.config import Settings

UNREACHABLE = {
    # nothing listens on port 1; the connection is refused at once
    "postgresql": "postgresql://postgres@127.0.0.1:1/devicecontrol",
    "sqlite": "sqlite:////nonexistent-directory/devicecontrol.db",
}


@pytest.mark.parametrize("backend", sorted(UNREACHABLE))
async def test_unreachable_database_is_503_with_retry_after(backend: str) -> None:
    app = create_app(Settings(database_url=UNREACHABLE[backend]))
    async with AsyncTestClient(app=app) as client:
        started = time.monotonic()
        responses = [
            await client.get("/v1/users/me", headers={"Authorization": "Bearer " + "a" * 40}),
            await client.post(
                "/v1/auth/login",
                json={"client_id": "a", "client_secret": "b", "username": "c", "password": "d"},
            ),
        ]
        elapsed = time.monotonic() - started
    for response in responses:
        assert response.status_code == 503, response.text
        assert response.headers["retry-after"].isdigit()
        assert response.headers["content-type"].startswith("application/problem+json")
        body = response.json()
        assert body["status"] == 503
        assert "Traceback" not in response.text and "SELECT" not in response.text
    assert elapsed < 10
