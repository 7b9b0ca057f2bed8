"""Protected endpoints and the bearer access token (contract §2)."""

from __future__ import annotations

import pytest
from litestar.testing import AsyncTestClient
from sqlalchemy import update

from devicecontrol.clock import utcnow
from devicecontrol.config import MAX_TOKEN_CACHE_MS, Settings
from devicecontrol.database.tables import access_tokens
from devicecontrol.users.service import disable_user, set_password
from tests.apps import lent_client
from tests.auth.oauth import EMAIL, account, expire_every_token, post_login
from tests.conftest import SQLITE_ENOUGH
from tests.factories import login, make_controller, make_user

pytestmark = SQLITE_ENOUGH

MISSING = 'Bearer realm="devicecontrol"'
INVALID = 'Bearer realm="devicecontrol", error="invalid_token"'
PROTECTED = [
    ("GET", "/users/me"),
    ("GET", "/controllers"),
    ("GET", "/controllers/MINE1"),
    ("POST", "/controllers/FREE1/assign"),
    ("PATCH", "/controllers/MINE1/reassign"),
]


async def access_token_of(client: AsyncTestClient, **overrides: str) -> str:
    response = await post_login(client, **overrides)
    assert response.status_code == 200, response.text
    return response.json()["auth"]["access_token"]


def assert_unauthenticated(response, challenge: str) -> None:
    assert response.status_code == 401, response.text
    assert response.headers["www-authenticate"] == challenge
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["status"] == 401


async def me(client: AsyncTestClient, authorization: str):
    return await client.get("/v1/users/me", headers={"Authorization": authorization})


@pytest.mark.parametrize("prefix", ["/v1", ""])
@pytest.mark.parametrize(("method", "path"), PROTECTED)
async def test_missing_token_is_401_with_the_realm_challenge(runtime, client, prefix, method, path):
    await account(runtime)
    await make_user(runtime, "bob@example.com")
    await make_controller(runtime, "MINE1", owner=EMAIL)
    await make_controller(runtime, "FREE1")
    response = await client.request(method, prefix + path, json={"owner": "bob@example.com"})
    assert_unauthenticated(response, MISSING)


async def test_empty_authorization_header_is_401_with_the_realm_challenge(runtime, client):
    await account(runtime)
    assert_unauthenticated(await me(client, ""), MISSING)


async def test_missing_token_changes_nothing(runtime, client):
    await account(runtime)
    await make_controller(runtime, "FREE1")
    assert (await client.post("/v1/controllers/FREE1/assign")).status_code == 401
    headers = {"Authorization": f"Bearer {await access_token_of(client)}"}
    assign = await client.post("/v1/controllers/FREE1/assign", headers=headers)
    assert assign.status_code == 200  # still unowned, so the caller can claim it


@pytest.mark.parametrize(
    "token", ["0" * 40, "f" * 40, "short", "g" * 40, "0" * 41, "' OR '1'='1", "é" * 40]
)
async def test_unknown_token_is_401_invalid_token(runtime, client, token):
    await account(runtime)
    await access_token_of(client)
    response = await client.get(
        "/v1/users/me", headers=[(b"authorization", f"Bearer {token}".encode())]
    )
    assert_unauthenticated(response, INVALID)


@pytest.mark.parametrize("scheme", ["Bearer", "bearer", "BEARER", "bEaReR"])
async def test_bearer_scheme_word_is_case_insensitive(runtime, client, scheme):
    user_id = await account(runtime)
    response = await me(client, f"{scheme} {await access_token_of(client)}")
    assert response.status_code == 200, response.text
    assert response.json()["users"]["user_id"] == user_id


@pytest.mark.parametrize("scheme", ["Basic", "Token", "Bearer:"])
async def test_other_scheme_is_401(runtime, client, scheme):
    await account(runtime)
    response = await me(client, f"{scheme} {await access_token_of(client)}")
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith(MISSING)


async def test_token_alone_without_scheme_is_401(runtime, client):
    await account(runtime)
    response = await me(client, await access_token_of(client))
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith(MISSING)


async def test_each_token_is_its_own_users(runtime, client):
    ana_id = await account(runtime)
    bob_id = await make_user(runtime, "bob@example.com")
    ana_token = await access_token_of(client)
    bob_token = (await login(client, "bob@example.com"))["access_token"]
    assert (await me(client, f"Bearer {ana_token}")).json()["users"]["user_id"] == ana_id
    assert (await me(client, f"Bearer {bob_token}")).json()["users"]["user_id"] == bob_id


async def test_expired_access_token_is_401_invalid_token(runtime, client):
    await account(runtime)
    token = await access_token_of(client)
    await expire_every_token(runtime, access_tokens)
    assert_unauthenticated(await me(client, f"Bearer {token}"), INVALID)


async def test_access_token_expires_after_the_configured_ttl(runtime, database_url, clock):
    await account(runtime)
    settings = Settings(database_url=database_url, access_token_ttl=1)
    async with lent_client(settings) as custom:
        token = await access_token_of(custom)
        clock.advance(0.9)
        assert (await me(custom, f"Bearer {token}")).status_code == 200
        clock.advance(0.1)  # one second after the login, though the token is cached
        assert_unauthenticated(await me(custom, f"Bearer {token}"), INVALID)


async def test_revoked_access_token_is_401_invalid_token(runtime, client):
    await account(runtime)
    token = await access_token_of(client)
    async with runtime.database.write() as connection:
        await connection.execute(update(access_tokens).values(revoked_at=utcnow()))
    assert_unauthenticated(await me(client, f"Bearer {token}"), INVALID)


async def test_disabled_users_tokens_stop_within_the_token_cache_bound(runtime, client, clock):
    """``runtime`` is another process here (the CLI's ``users disable``): the app may serve a
    token it checked moments ago from its cache, for less than a second."""
    await account(runtime)
    tokens = [await access_token_of(client) for _ in range(2)]
    assert (await me(client, f"Bearer {tokens[0]}")).status_code == 200
    await disable_user(runtime, EMAIL)
    clock.advance(MAX_TOKEN_CACHE_MS / 1000)  # no cache may keep an entry this long
    status = (await me(client, f"Bearer {tokens[0]}")).status_code
    assert status == 401, "a disabled user's token outlived the bound"
    for token in tokens:
        assert_unauthenticated(await me(client, f"Bearer {token}"), INVALID)


async def test_disabling_one_user_leaves_others_tokens_working(runtime, client):
    await account(runtime)
    await make_user(runtime, "bob@example.com")
    bob_token = (await login(client, "bob@example.com"))["access_token"]
    await disable_user(runtime, EMAIL)
    assert (await me(client, f"Bearer {bob_token}")).status_code == 200


async def test_set_password_revokes_the_users_access_tokens(runtime, client):
    await account(runtime)
    old = await access_token_of(client)
    await set_password(runtime, EMAIL, password="a brand new password")
    assert_unauthenticated(await me(client, f"Bearer {old}"), INVALID)
    new = await access_token_of(client, password="a brand new password")
    assert (await me(client, f"Bearer {new}")).status_code == 200


async def test_old_password_stops_working_after_set_password(runtime, client):
    await account(runtime)
    await set_password(runtime, EMAIL, password="a brand new password")
    response = await post_login(client)
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_grant"
