"""POST /auth/renew (contract §2) and its OAuth2 errors (§7)."""

from __future__ import annotations

import re

import pytest
from litestar.testing import AsyncTestClient

from devicecontrol.config import Settings
from devicecontrol.database.tables import refresh_tokens
from devicecontrol.users.service import disable_user, set_password
from tests.apps import lent_client
from tests.auth.oauth import (
    EMAIL,
    TOKEN_PATTERN,
    account,
    assert_oauth_error,
    assert_token_endpoint_answered,
    expire_every_token,
    post_login,
    post_renew,
    renew_body,
)
from tests.conftest import SQLITE_ENOUGH
from tests.factories import bearer, make_client, make_user

pytestmark = SQLITE_ENOUGH

RENEW_FIELDS = ("client_id", "client_secret", "refresh_token")


async def refresh_token_of(client: AsyncTestClient, **overrides: str) -> str:
    response = await post_login(client, **overrides)
    assert response.status_code == 200, response.text
    return response.json()["auth"]["refresh_token"]


async def test_renew_returns_the_auth_shape_without_refresh_token(runtime, client):
    await account(runtime)
    response = await post_renew(client, await refresh_token_of(client))
    body = assert_token_endpoint_answered(response, "renew")
    assert set(body) == {"auth", "_links"}
    auth = body["auth"]
    assert set(auth) == {"access_token", "expires_in", "token_type", "scope"}
    assert re.fullmatch(TOKEN_PATTERN, auth["access_token"])
    assert auth["expires_in"] == 86400
    assert auth["token_type"] == "Bearer"
    assert auth["scope"] is None


async def test_renewed_access_token_works_for_the_same_user(runtime, client):
    user_id = await account(runtime)
    await make_user(runtime, "bob@example.com")
    renewed = (await post_renew(client, await refresh_token_of(client))).json()["auth"]
    me = await client.get("/v1/users/me", headers=bearer(renewed["access_token"]))
    assert me.status_code == 200
    assert me.json()["users"]["user_id"] == user_id


async def test_renew_accepts_a_form_body(runtime, client):
    await account(runtime)
    response = await client.post(
        "/v1/auth/renew", data=renew_body(await refresh_token_of(client), grant_type="refresh")
    )
    assert response.status_code == 200, response.text
    assert "refresh_token" not in response.json()["auth"]


async def test_renew_does_not_rotate_the_refresh_token(runtime, client):
    await account(runtime)
    refresh_token = await refresh_token_of(client)
    issued = set()
    for _ in range(3):
        response = await post_renew(client, refresh_token)
        assert response.status_code == 200, response.text
        issued.add(response.json()["auth"]["access_token"])
    assert len(issued) == 3
    for access_token in issued:
        me = await client.get("/v1/users/me", headers=bearer(access_token))
        assert me.status_code == 200


async def test_renew_expires_in_follows_the_configured_access_token_ttl(runtime, database_url):
    await account(runtime)
    settings = Settings(database_url=database_url, access_token_ttl=600)
    async with lent_client(settings) as custom:
        response = await post_renew(custom, await refresh_token_of(custom))
    assert response.json()["auth"]["expires_in"] == 600


async def test_refresh_token_of_another_client_is_invalid_grant(runtime, client):
    await account(runtime)
    other_secret = await make_client(runtime, "other-app", secret="other-secret-0123456789")
    refresh_token = await refresh_token_of(client)
    stolen = await post_renew(
        client, refresh_token, client_id="other-app", client_secret=other_secret
    )
    assert_oauth_error(stolen, "invalid_grant", 400)
    assert (await post_renew(client, refresh_token)).status_code == 200  # still its own


@pytest.mark.parametrize(
    "refresh_token", ["0" * 40, "not-a-token", "A" * 40, "x" * 1024], ids=str.__len__
)
async def test_unknown_refresh_token_is_invalid_grant(runtime, client, refresh_token):
    await account(runtime)
    await refresh_token_of(client)
    assert_oauth_error(await post_renew(client, refresh_token), "invalid_grant", 400)


async def test_access_token_is_not_a_refresh_token(runtime, client):
    await account(runtime)
    access_token = (await post_login(client)).json()["auth"]["access_token"]
    assert_oauth_error(await post_renew(client, access_token), "invalid_grant", 400)


async def test_expired_refresh_token_is_invalid_grant(runtime, client):
    await account(runtime)
    refresh_token = await refresh_token_of(client)
    await expire_every_token(runtime, refresh_tokens)
    assert_oauth_error(await post_renew(client, refresh_token), "invalid_grant", 400)


async def test_refresh_token_expires_after_the_configured_ttl(runtime, database_url, clock):
    await account(runtime)
    settings = Settings(database_url=database_url, refresh_token_ttl=1)
    async with lent_client(settings) as custom:
        refresh_token = await refresh_token_of(custom)
        clock.advance(0.9)
        renewed = await post_renew(custom, refresh_token)
        assert renewed.status_code == 200, renewed.text
        clock.advance(0.1)  # one second after the login
        assert_oauth_error(await post_renew(custom, refresh_token), "invalid_grant", 400)


async def test_refresh_token_of_disabled_user_is_invalid_grant(runtime, client):
    await account(runtime)
    refresh_token = await refresh_token_of(client)
    await disable_user(runtime, EMAIL)
    assert_oauth_error(await post_renew(client, refresh_token), "invalid_grant", 400)


async def test_refresh_token_is_revoked_by_a_new_password(runtime, client):
    await account(runtime)
    refresh_token = await refresh_token_of(client)
    await set_password(runtime, EMAIL, password="a brand new password")
    assert_oauth_error(await post_renew(client, refresh_token), "invalid_grant", 400)
    fresh = await refresh_token_of(client, password="a brand new password")
    assert (await post_renew(client, fresh)).status_code == 200


@pytest.mark.parametrize("missing", RENEW_FIELDS)
async def test_renew_missing_field_is_invalid_request(runtime, client, missing):
    await account(runtime)
    body = renew_body(await refresh_token_of(client))
    del body[missing]
    response = await client.post("/v1/auth/renew", json=body)
    body = assert_oauth_error(response, "invalid_request", 400)
    assert [error["field"] for error in body["errors"]] == [missing]


async def test_renew_malformed_refresh_token_field_is_invalid_request(runtime, client):
    await account(runtime)
    response = await client.post("/v1/auth/renew", json=renew_body(12345))
    body = assert_oauth_error(response, "invalid_request", 400)
    assert [error["field"] for error in body["errors"]] == ["refresh_token"]


async def test_renew_unknown_client_or_wrong_secret_is_invalid_client(runtime, client):
    await account(runtime)
    refresh_token = await refresh_token_of(client)
    unknown = await post_renew(client, refresh_token, client_id="no-such-app")
    body = assert_oauth_error(unknown, "invalid_client", 401)
    wrong = await post_renew(client, refresh_token, client_secret="wrong-secret-0123456789")
    assert assert_oauth_error(wrong, "invalid_client", 401) == body
