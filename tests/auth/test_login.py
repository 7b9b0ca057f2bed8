"""POST /auth/login (contract §2) and its OAuth2 errors (§7)."""

from __future__ import annotations

import re
import statistics
import time
from datetime import timedelta

import pytest
from argon2 import PasswordHasher, extract_parameters
from sqlalchemy import select

from devicecontrol.auth.passwords import needs_rehash
from devicecontrol.config import Settings
from devicecontrol.database.tables import access_tokens, refresh_tokens, users
from devicecontrol.users import repository as users_repository
from devicecontrol.users.service import disable_user
from tests.apps import lent_client
from tests.auth.oauth import (
    EMAIL,
    TOKEN_PATTERN,
    account,
    assert_oauth_error,
    assert_token_endpoint_answered,
    login_body,
    post_login,
)
from tests.factories import CLIENT_SECRET, PASSWORD, bearer, make_client, make_user

LOGIN_FIELDS = ("client_id", "client_secret", "username", "password")


async def test_login_returns_the_auth_shape(runtime, client):
    await account(runtime)
    body = assert_token_endpoint_answered(await post_login(client), "login")
    assert set(body) == {"auth", "_links"}
    auth = body["auth"]
    assert set(auth) == {"access_token", "expires_in", "token_type", "scope", "refresh_token"}
    assert auth["expires_in"] == 86400
    assert auth["token_type"] == "Bearer"
    assert auth["scope"] is None


async def test_login_tokens_are_40_lowercase_hex_and_distinct(runtime, client):
    await account(runtime)
    seen = set()
    for _ in range(2):
        auth = (await post_login(client)).json()["auth"]
        assert re.fullmatch(TOKEN_PATTERN, auth["access_token"])
        assert re.fullmatch(TOKEN_PATTERN, auth["refresh_token"])
        seen |= {auth["access_token"], auth["refresh_token"]}
    assert len(seen) == 4


async def test_login_access_token_opens_protected_endpoints(runtime, client):
    user_id = await account(runtime)
    auth = (await post_login(client)).json()["auth"]
    me = await client.get("/v1/users/me", headers=bearer(auth["access_token"]))
    assert me.status_code == 200
    assert me.json()["users"]["user_id"] == user_id


async def test_login_accepts_a_form_body(runtime, client):
    user_id = await account(runtime)
    response = await client.post("/v1/auth/login", data=login_body())
    assert response.status_code == 200, response.text
    auth = response.json()["auth"]
    assert re.fullmatch(TOKEN_PATTERN, auth["refresh_token"])
    me = await client.get("/v1/users/me", headers=bearer(auth["access_token"]))
    assert me.json()["users"]["user_id"] == user_id


@pytest.mark.parametrize("form", [False, True], ids=["json", "form"])
async def test_login_ignores_extra_fields_such_as_grant_type(runtime, client, form):
    await account(runtime)
    body = login_body(grant_type="password", scope="everything", device="phone")
    response = await (
        client.post("/v1/auth/login", data=body)
        if form
        else client.post("/v1/auth/login", json=body)
    )
    assert response.status_code == 200, response.text
    assert response.json()["auth"]["scope"] is None


async def test_login_expires_in_follows_the_configured_access_token_ttl(runtime, database_url):
    await account(runtime)
    settings = Settings(database_url=database_url, access_token_ttl=3600, refresh_token_ttl=7200)
    async with lent_client(settings) as custom:
        auth = (await post_login(custom)).json()["auth"]
    assert auth["expires_in"] == 3600
    async with runtime.database.read() as connection:
        access = (await connection.execute(select(access_tokens))).one()
        refresh = (await connection.execute(select(refresh_tokens))).one()
    assert access.expires_at - access.created_at == timedelta(seconds=3600)
    assert refresh.expires_at - refresh.created_at == timedelta(seconds=7200)


async def test_login_refresh_token_lives_30_days_by_default(runtime, client):
    await account(runtime)
    assert (await post_login(client)).status_code == 200
    async with runtime.database.read() as connection:
        refresh = (await connection.execute(select(refresh_tokens))).one()
        access = (await connection.execute(select(access_tokens))).one()
    assert refresh.expires_at - refresh.created_at == timedelta(days=30)
    assert access.expires_at - access.created_at == timedelta(seconds=86400)


@pytest.mark.parametrize("username", ["ANA@EXAMPLE.COM", "Ana@Example.Com", "ana@EXAMPLE.com"])
async def test_login_username_is_case_insensitive(runtime, client, username):
    user_id = await account(runtime)
    response = await post_login(client, username=username)
    assert response.status_code == 200, response.text
    me = await client.get("/v1/users/me", headers=bearer(response.json()["auth"]["access_token"]))
    assert me.json()["users"]["user_id"] == user_id


async def test_login_of_mixed_case_account_with_lower_case_username(runtime, client):
    await make_client(runtime)
    await make_user(runtime, "Mixed.Case@Example.COM")
    response = await post_login(client, username="mixed.case@example.com")
    assert response.status_code == 200, response.text


async def test_wrong_password_and_unknown_user_get_the_same_answer(runtime, client):
    await account(runtime)
    wrong_password = await post_login(client, password="not the password")
    unknown_user = await post_login(client, username="nobody@example.com")
    body = assert_oauth_error(wrong_password, "invalid_grant", 400)
    assert assert_oauth_error(unknown_user, "invalid_grant", 400) == body
    # each answer has its own request id (X-Request-ID); nothing else may differ
    headers = [
        {k: v for k, v in r.headers.items() if k != "x-request-id"}
        for r in (wrong_password, unknown_user)
    ]
    assert headers[0] == headers[1]


async def test_unknown_user_costs_a_password_check_like_a_wrong_password(
    runtime, client, production_hasher
):
    """Timing must not reveal accounts: an unknown user is checked against a dummy hash.

    At production cost: with the cheap test profile the hash is lost in the request's noise.
    """
    await account(runtime)

    async def seconds(**overrides: str) -> float:
        start = time.perf_counter()
        response = await post_login(client, **overrides)
        assert response.status_code == 400
        return time.perf_counter() - start

    await seconds(username="warm-up@example.com")
    wrong = statistics.median([await seconds(password="wrong password") for _ in range(3)])
    unknown = statistics.median([await seconds(username="nobody@example.com") for _ in range(3)])
    assert unknown > 0.4 * wrong, (unknown, wrong)
    assert wrong > 0.4 * unknown, (unknown, wrong)


async def test_login_rehashes_a_password_hashed_with_other_parameters(
    runtime, client, production_hasher
):
    """A hash from older, weaker parameters is replaced by one of today's at the next login."""
    user_id = await account(runtime)
    weak = PasswordHasher(time_cost=1, memory_cost=8, parallelism=1).hash(PASSWORD)
    async with runtime.database.write() as connection:
        await users_repository.set_password_hash(connection, user_id, weak)
    assert needs_rehash(weak)

    async def stored_hash() -> str:
        async with runtime.database.read() as connection:
            query = select(users.c.password_hash).where(users.c.id == user_id)
            return (await connection.execute(query)).scalar_one()

    assert (await post_login(client)).status_code == 200
    rehashed = await stored_hash()
    assert rehashed != weak
    parameters = extract_parameters(rehashed)
    assert (parameters.time_cost, parameters.memory_cost, parameters.parallelism) == (
        production_hasher.time_cost,
        production_hasher.memory_cost,
        production_hasher.parallelism,
    )
    assert not needs_rehash(rehashed)
    # the new hash opens the account, and a current hash is left as it is
    assert (await post_login(client)).status_code == 200
    assert await stored_hash() == rehashed


async def test_disabled_user_cannot_log_in(runtime, client):
    await account(runtime)
    await disable_user(runtime, EMAIL)
    response = await post_login(client)
    body = assert_oauth_error(response, "invalid_grant", 400)
    wrong_password = await post_login(client, password="not the password")
    assert wrong_password.json() == body  # no hint that the account exists


@pytest.mark.parametrize("missing", LOGIN_FIELDS)
async def test_login_missing_field_is_invalid_request(runtime, client, missing):
    await account(runtime)
    response = await client.post(
        "/v1/auth/login", json={k: v for k, v in login_body().items() if k != missing}
    )
    body = assert_oauth_error(response, "invalid_request", 400)
    assert [error["field"] for error in body["errors"]] == [missing]


@pytest.mark.parametrize("missing", LOGIN_FIELDS)
async def test_login_form_missing_field_is_invalid_request(runtime, client, missing):
    await account(runtime)
    response = await client.post(
        "/v1/auth/login", data={k: v for k, v in login_body().items() if k != missing}
    )
    body = assert_oauth_error(response, "invalid_request", 400)
    assert [error["field"] for error in body["errors"]] == [missing]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("password", 12345678),
        ("username", ["ana@example.com"]),
        ("client_id", {"id": "test-app"}),
        ("client_secret", True),
        ("username", ""),
        ("password", "x" * 5000),
    ],
)
async def test_login_malformed_field_is_invalid_request(runtime, client, field, value):
    await account(runtime)
    response = await client.post("/v1/auth/login", json={**login_body(), field: value})
    body = assert_oauth_error(response, "invalid_request", 400)
    assert [error["field"] for error in body["errors"]] == [field]
    assert all(error["message"] for error in body["errors"])


async def test_login_empty_body_is_invalid_request_naming_every_field(runtime, client):
    response = await client.post("/v1/auth/login", json={})
    body = assert_oauth_error(response, "invalid_request", 400)
    assert {error["field"] for error in body["errors"]} == set(LOGIN_FIELDS)


async def test_login_unknown_client_is_invalid_client(runtime, client):
    await account(runtime)
    unknown = await post_login(client, client_id="no-such-app")
    body = assert_oauth_error(unknown, "invalid_client", 401)
    wrong_secret = await post_login(client, client_secret=CLIENT_SECRET + "x")
    assert assert_oauth_error(wrong_secret, "invalid_client", 401) == body


async def test_login_client_is_checked_before_the_password(runtime, client):
    await account(runtime)
    response = await post_login(client, client_secret="wrong-secret-0123456789", password="bad")
    assert_oauth_error(response, "invalid_client", 401)


async def test_login_with_the_secret_of_another_client_is_invalid_client(runtime, client):
    await account(runtime)
    other_secret = await make_client(runtime, "other-app", secret="other-secret-0123456789")
    response = await post_login(client, client_secret=other_secret)
    assert_oauth_error(response, "invalid_client", 401)


async def test_login_password_is_checked_exactly(runtime, client):
    await account(runtime)
    for near_miss in (PASSWORD.upper(), PASSWORD + " ", PASSWORD[:-1]):
        response = await post_login(client, password=near_miss)
        assert_oauth_error(response, "invalid_grant", 400)
