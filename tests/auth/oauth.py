"""Requests to the token endpoints and checks of their RFC 6749 error bodies."""

from __future__ import annotations

import hashlib
from datetime import timedelta
from typing import Any

from litestar.testing import AsyncTestClient
from sqlalchemy import Table, update

from devicecontrol.clock import utcnow
from devicecontrol.runtime import Runtime
from tests.factories import CLIENT_ID, CLIENT_SECRET, PASSWORD, make_client, make_user

EMAIL = "ana@example.com"
TOKEN_PATTERN = r"[0-9a-f]{40}"


def login_body(**overrides: Any) -> dict[str, Any]:
    body = {
        "client_id": CLIENT_ID,
        "client_secret": CLIENT_SECRET,
        "username": EMAIL,
        "password": PASSWORD,
    }
    return {k: v for k, v in {**body, **overrides}.items() if v is not None}


def renew_body(refresh_token: str, **overrides: Any) -> dict[str, Any]:
    body = {"client_id": CLIENT_ID, "client_secret": CLIENT_SECRET, "refresh_token": refresh_token}
    return {k: v for k, v in {**body, **overrides}.items() if v is not None}


async def account(runtime: Runtime) -> int:
    """The test client and ana@example.com; returns her user id."""
    await make_client(runtime)
    return await make_user(runtime, EMAIL)


async def post_login(client: AsyncTestClient, **overrides: Any) -> Any:
    return await client.post("/v1/auth/login", json=login_body(**overrides))


async def post_renew(client: AsyncTestClient, refresh_token: str, **overrides: Any) -> Any:
    return await client.post("/v1/auth/renew", json=renew_body(refresh_token, **overrides))


async def expire_every_token(runtime: Runtime, table: Table) -> None:
    """Every token of ``table`` (access or refresh tokens) expired a second ago."""
    async with runtime.database.write() as connection:
        await connection.execute(update(table).values(expires_at=utcnow() - timedelta(seconds=1)))


def sha256_hex(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def assert_oauth_error(response: Any, code: str, status: int) -> dict[str, Any]:
    """RFC 6749 §5.2 inside problem details: the code is both ``title`` and ``error``."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert response.headers["cache-control"] == "no-store"
    assert response.headers["pragma"] == "no-cache"
    body = response.json()
    assert body["error"] == code
    assert body["title"] == code
    assert body["status"] == status
    assert body["type"] == "about:blank"
    assert isinstance(body["detail"], str) and body["detail"]
    return body


def assert_token_endpoint_answered(response: Any, path: str) -> dict[str, Any]:
    """A token endpoint's 200 (``path``: login, renew, revoke): HAL that links to itself,
    never cached; returns the body."""
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/hal+json"
    assert response.headers["cache-control"] == "no-store"
    assert response.headers["pragma"] == "no-cache"
    body = response.json()
    assert body["_links"] == {"self": {"href": f"/v1/auth/{path}"}}
    return body
