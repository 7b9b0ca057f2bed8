"""POST /auth/revoke (contract §8, RFC 7009): the client's own tokens, access or refresh."""

from __future__ import annotations

import asyncio
import base64
from datetime import datetime, timedelta
from typing import Any

import pytest
from litestar.testing import AsyncTestClient
from sqlalchemy import select, text, update

from devicecontrol.auth import repository as auth_repository
from devicecontrol.auth import service
from devicecontrol.clock import utcnow
from devicecontrol.database.tables import access_tokens, refresh_tokens
from devicecontrol.errors import OAuthError
from devicecontrol.users import service as users_service
from tests.auth.oauth import (
    account,
    assert_oauth_error,
    assert_token_endpoint_answered,
    post_login,
    post_renew,
    sha256_hex,
)
from tests.cli.support import snapshot
from tests.conftest import SQLITE_ENOUGH
from tests.factories import CLIENT_ID, CLIENT_SECRET, bearer, make_client, me_status

pytestmark = SQLITE_ENOUGH

REVOKE_FIELDS = ("client_id", "client_secret", "token")
OTHER_ID, OTHER_SECRET = "other-app", "other-secret-0123456789"
BASIC_CHALLENGE = 'Basic realm="devicecontrol"'


def revoke_body(token: Any, **overrides: Any) -> dict[str, Any]:
    body = {"client_id": CLIENT_ID, "client_secret": CLIENT_SECRET, "token": token}
    return {k: v for k, v in {**body, **overrides}.items() if v is not None}


async def post_revoke(
    client: AsyncTestClient, token: Any, path: str = "/v1/auth/revoke", **overrides: Any
) -> Any:
    return await client.post(path, json=revoke_body(token, **overrides))


def basic(client_id: str, secret: str) -> dict[str, str]:
    encoded = base64.b64encode(f"{client_id}:{secret}".encode()).decode()
    return {"Authorization": f"Basic {encoded}"}


def assert_revoke_succeeded(response: Any) -> None:
    assert set(assert_token_endpoint_answered(response, "revoke")) == {"_links"}


async def tokens_of_login(client: AsyncTestClient, **overrides: Any) -> dict[str, Any]:
    response = await post_login(client, **overrides)
    assert response.status_code == 200, response.text
    return response.json()["auth"]


async def renewed_access_token(
    client: AsyncTestClient, refresh_token: str, **overrides: Any
) -> str:
    response = await post_renew(client, refresh_token, **overrides)
    assert response.status_code == 200, response.text
    return response.json()["auth"]["access_token"]


async def row_by_digest(runtime, table, token: str) -> Any:
    async with runtime.database.read() as connection:
        query = select(table).where(table.c.digest == sha256_hex(token))
        return (await connection.execute(query)).one()


async def revoked_at_by_digest(runtime, table) -> dict[str, datetime | None]:
    async with runtime.database.read() as connection:
        return {
            row.digest: row.revoked_at
            for row in await connection.execute(select(table.c.digest, table.c.revoked_at))
        }


# --- access tokens ----------------------------------------------------------------------


@pytest.mark.parametrize("how", ["json", "form", "basic"])
async def test_revoking_an_access_token_ends_that_token_and_no_other(runtime, client, how):
    await account(runtime)
    doomed = (await tokens_of_login(client))["access_token"]
    other = (await tokens_of_login(client))["access_token"]
    assert await me_status(client, doomed) == 200
    if how == "json":
        response = await client.post("/v1/auth/revoke", json=revoke_body(doomed))
    elif how == "form":
        response = await client.post("/v1/auth/revoke", data=revoke_body(doomed))
    else:
        response = await client.post(
            "/v1/auth/revoke", data={"token": doomed}, headers=basic(CLIENT_ID, CLIENT_SECRET)
        )
    assert_revoke_succeeded(response)
    assert await me_status(client, doomed) == 401
    assert await me_status(client, other) == 200


async def test_revoked_access_token_is_stored_as_a_digest_with_revoked_at_set(runtime, client):
    await account(runtime)
    doomed = await tokens_of_login(client)
    kept = await tokens_of_login(client)
    before = utcnow()
    assert_revoke_succeeded(await post_revoke(client, doomed["access_token"]))
    after = utcnow()
    row = await row_by_digest(runtime, access_tokens, doomed["access_token"])
    assert row.revoked_at is not None
    assert before <= row.revoked_at <= after
    access = await revoked_at_by_digest(runtime, access_tokens)
    refresh = await revoked_at_by_digest(runtime, refresh_tokens)
    # only the one access token: its refresh token and the other login are untouched
    assert access == {
        sha256_hex(doomed["access_token"]): row.revoked_at,
        sha256_hex(kept["access_token"]): None,
    }
    assert refresh == {
        sha256_hex(doomed["refresh_token"]): None,
        sha256_hex(kept["refresh_token"]): None,
    }
    stored = repr(await snapshot(runtime))
    for auth in (doomed, kept):
        assert auth["access_token"] not in stored
        assert auth["refresh_token"] not in stored


# --- refresh tokens ---------------------------------------------------------------------


async def test_revoking_a_refresh_token_ends_it_and_every_access_token_issued_from_it(
    runtime, client
):
    await account(runtime)
    session = await tokens_of_login(client)
    from_session = [
        session["access_token"],
        await renewed_access_token(client, session["refresh_token"]),
        await renewed_access_token(client, session["refresh_token"]),
    ]
    elsewhere = await tokens_of_login(client)
    for token in (*from_session, elsewhere["access_token"]):
        assert await me_status(client, token) == 200

    assert_revoke_succeeded(await post_revoke(client, session["refresh_token"]))

    assert_oauth_error(await post_renew(client, session["refresh_token"]), "invalid_grant", 400)
    for token in from_session:
        assert await me_status(client, token) == 401
    assert await me_status(client, elsewhere["access_token"]) == 200
    assert (
        await me_status(client, await renewed_access_token(client, elsewhere["refresh_token"]))
        == 200
    )


async def test_revoked_refresh_token_and_its_access_tokens_have_revoked_at_set(runtime, client):
    await account(runtime)
    session = await tokens_of_login(client)
    renewed = await renewed_access_token(client, session["refresh_token"])
    elsewhere = await tokens_of_login(client)
    before = utcnow()
    assert_revoke_succeeded(await post_revoke(client, session["refresh_token"]))
    after = utcnow()
    refresh = await revoked_at_by_digest(runtime, refresh_tokens)
    access = await revoked_at_by_digest(runtime, access_tokens)
    revoked_at = refresh[sha256_hex(session["refresh_token"])]
    assert revoked_at is not None
    assert before <= revoked_at <= after
    assert refresh[sha256_hex(elsewhere["refresh_token"])] is None
    assert access[sha256_hex(session["access_token"])] == revoked_at
    assert access[sha256_hex(renewed)] == revoked_at
    assert access[sha256_hex(elsewhere["access_token"])] is None


# --- nothing to revoke ------------------------------------------------------------------


@pytest.mark.parametrize(
    "token", ["0" * 40, "f" * 40, "not-a-token", "x" * 1024], ids=["zeros", "fs", "word", "long"]
)
async def test_unknown_token_is_200_and_changes_nothing(runtime, client, token):
    await account(runtime)
    auth = await tokens_of_login(client)
    before = await snapshot(runtime)
    assert_revoke_succeeded(await post_revoke(client, token))
    assert await snapshot(runtime) == before
    assert await me_status(client, auth["access_token"]) == 200


async def test_tokens_of_another_client_are_200_and_not_revoked(runtime, client):
    await account(runtime)
    await make_client(runtime, OTHER_ID, secret=OTHER_SECRET)
    theirs = await tokens_of_login(client, client_id=OTHER_ID, client_secret=OTHER_SECRET)
    before = await snapshot(runtime)
    for token in (theirs["access_token"], theirs["refresh_token"]):
        assert_revoke_succeeded(await post_revoke(client, token))
    assert await snapshot(runtime) == before
    assert await me_status(client, theirs["access_token"]) == 200
    await renewed_access_token(
        client, theirs["refresh_token"], client_id=OTHER_ID, client_secret=OTHER_SECRET
    )
    # and the owning client can still revoke them
    revoked = await post_revoke(
        client, theirs["access_token"], client_id=OTHER_ID, client_secret=OTHER_SECRET
    )
    assert_revoke_succeeded(revoked)
    assert await me_status(client, theirs["access_token"]) == 401


@pytest.mark.parametrize("kind", ["access_token", "refresh_token"])
async def test_revoking_an_already_revoked_token_is_200_and_keeps_the_first_revocation(
    runtime, client, kind
):
    await account(runtime)
    auth = await tokens_of_login(client)
    assert_revoke_succeeded(await post_revoke(client, auth[kind]))
    table = access_tokens if kind == "access_token" else refresh_tokens
    first = utcnow() - timedelta(days=1)
    async with runtime.database.write() as connection:
        await connection.execute(
            update(table).where(table.c.digest == sha256_hex(auth[kind])).values(revoked_at=first)
        )
    before = await snapshot(runtime)
    assert_revoke_succeeded(await post_revoke(client, auth[kind]))
    assert await snapshot(runtime) == before
    assert (await row_by_digest(runtime, table, auth[kind])).revoked_at == first


# --- token_type_hint --------------------------------------------------------------------


@pytest.mark.parametrize("hint", ["access_token", "refresh_token", "no_such_type", ""])
@pytest.mark.parametrize("kind", ["access_token", "refresh_token"])
async def test_any_token_type_hint_is_accepted_and_the_token_is_found(runtime, client, kind, hint):
    await account(runtime)
    auth = await tokens_of_login(client)
    response = await post_revoke(client, auth[kind], token_type_hint=hint)
    assert_revoke_succeeded(response)
    if kind == "access_token":
        assert await me_status(client, auth["access_token"]) == 401
        assert (await post_renew(client, auth["refresh_token"])).status_code == 200
    else:
        assert_oauth_error(await post_renew(client, auth["refresh_token"]), "invalid_grant", 400)
        assert await me_status(client, auth["access_token"]) == 401


async def test_a_token_type_hint_that_is_not_a_string_is_invalid_request(runtime, client):
    await account(runtime)
    auth = await tokens_of_login(client)
    response = await post_revoke(client, auth["access_token"], token_type_hint=7)
    body = assert_oauth_error(response, "invalid_request", 400)
    assert [error["field"] for error in body["errors"]] == ["token_type_hint"]
    assert await me_status(client, auth["access_token"]) == 200


# --- client authentication --------------------------------------------------------------


@pytest.mark.parametrize(
    "credentials",
    [
        {"client_id": "no-such-app"},
        {"client_secret": "wrong-secret-0123456789"},
        {"client_id": OTHER_ID},  # a real client, with the test client's secret
    ],
    ids=["unknown client", "wrong secret", "secret of another client"],
)
async def test_bad_client_credentials_are_invalid_client_and_revoke_nothing(
    runtime, client, credentials
):
    await account(runtime)
    await make_client(runtime, OTHER_ID, secret=OTHER_SECRET)
    auth = await tokens_of_login(client)
    before = await snapshot(runtime)
    for token in (auth["access_token"], auth["refresh_token"]):
        response = await post_revoke(client, token, **credentials)
        assert_oauth_error(response, "invalid_client", 401)
        assert response.headers["www-authenticate"] == BASIC_CHALLENGE
    after = await snapshot(runtime)
    # the only change: each failure counted per client id and per address (the throttle)
    counted = after.pop("throttle_failures")
    assert sorted(row[1] for row in counted) == ["client_address"] * 2 + ["client_id"] * 2
    before.pop("throttle_failures")
    assert after == before
    assert await me_status(client, auth["access_token"]) == 200


@pytest.mark.parametrize(
    "authorization",
    [
        basic(CLIENT_ID, "wrong-secret-0123456789")["Authorization"],
        basic("no-such-app", CLIENT_SECRET)["Authorization"],
        "Basic not-base64!",
        "Basic " + base64.b64encode(b"no-colon-here").decode(),
    ],
    ids=["wrong secret", "unknown client", "not base64", "no colon"],
)
async def test_bad_basic_credentials_are_invalid_client_even_with_good_ones_in_the_body(
    runtime, client, authorization
):
    await account(runtime)
    auth = await tokens_of_login(client)
    response = await client.post(
        "/v1/auth/revoke",
        json=revoke_body(auth["access_token"]),
        headers={"Authorization": authorization},
    )
    assert_oauth_error(response, "invalid_client", 401)
    assert response.headers["www-authenticate"] == BASIC_CHALLENGE
    assert await me_status(client, auth["access_token"]) == 200


async def test_basic_credentials_take_precedence_over_the_body(runtime, client):
    await account(runtime)
    auth = await tokens_of_login(client)
    response = await client.post(
        "/v1/auth/revoke",
        json=revoke_body(auth["access_token"], client_secret="wrong-secret-0123456789"),
        headers=basic(CLIENT_ID, CLIENT_SECRET),
    )
    assert_revoke_succeeded(response)
    assert await me_status(client, auth["access_token"]) == 401


# --- malformed requests -----------------------------------------------------------------


@pytest.mark.parametrize("missing", REVOKE_FIELDS)
async def test_a_missing_field_is_invalid_request_naming_it(runtime, client, missing):
    await account(runtime)
    auth = await tokens_of_login(client)
    body = revoke_body(auth["access_token"])
    del body[missing]
    response = await client.post("/v1/auth/revoke", json=body)
    problem = assert_oauth_error(response, "invalid_request", 400)
    assert [error["field"] for error in problem["errors"]] == [missing]
    assert await me_status(client, auth["access_token"]) == 200


async def test_an_empty_body_is_invalid_request_naming_every_field(runtime, client):
    await account(runtime)
    response = await client.post("/v1/auth/revoke")
    problem = assert_oauth_error(response, "invalid_request", 400)
    assert {error["field"] for error in problem["errors"]} == set(REVOKE_FIELDS)


@pytest.mark.parametrize("token", [12345, ["a" * 40], {"token": "a"}, True, ""], ids=repr)
async def test_a_token_that_is_not_a_non_empty_string_is_invalid_request(runtime, client, token):
    await account(runtime)
    response = await post_revoke(client, token)
    problem = assert_oauth_error(response, "invalid_request", 400)
    assert [error["field"] for error in problem["errors"]] == ["token"]


async def test_a_text_plain_body_is_415_and_not_stored(runtime, client):
    await account(runtime)
    auth = await tokens_of_login(client)
    response = await client.post(
        "/v1/auth/revoke",
        content=f"token={auth['access_token']}".encode(),
        headers={"Content-Type": "text/plain"},
    )
    assert response.status_code == 415, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert response.headers["cache-control"] == "no-store"
    assert response.headers["pragma"] == "no-cache"
    assert await me_status(client, auth["access_token"]) == 200


# --- paths and what it does not need ----------------------------------------------------


async def test_revoke_works_unprefixed_too(runtime, client):
    await account(runtime)
    auth = await tokens_of_login(client)
    assert_revoke_succeeded(await post_revoke(client, auth["refresh_token"], path="/auth/revoke"))
    assert_oauth_error(await post_renew(client, auth["refresh_token"]), "invalid_grant", 400)
    assert await me_status(client, auth["access_token"]) == 401


async def test_revoke_needs_neither_a_bearer_token_nor_the_users_password(runtime, client):
    await account(runtime)
    auth = await tokens_of_login(client)
    body = {"client_id": CLIENT_ID, "client_secret": CLIENT_SECRET, "token": auth["access_token"]}
    response = await client.post("/v1/auth/revoke", json=body)
    assert "authorization" not in {name.lower() for name in response.request.headers}
    assert_revoke_succeeded(response)
    assert await me_status(client, auth["access_token"]) == 401


async def test_a_revoked_bearer_token_in_the_header_does_not_stop_a_revoke(runtime, client):
    await account(runtime)
    first, second = await tokens_of_login(client), await tokens_of_login(client)
    assert_revoke_succeeded(await post_revoke(client, first["access_token"]))
    response = await client.post(
        "/v1/auth/revoke",
        json=revoke_body(second["access_token"]),
        headers=bearer(first["access_token"]),
    )
    assert_revoke_succeeded(response)
    assert await me_status(client, second["access_token"]) == 401


# --- a renew racing the revocation of its refresh token ---------------------------------


async def _blocked_behind(runtime, task: asyncio.Task) -> None:
    """Return once ``task`` is really waiting for the paused transaction, never by time alone.

    PostgreSQL: the revoking backend shows up waiting on a lock (the renew's ``FOR UPDATE``
    row lock or its throttle lock). SQLite: writers take turns, so the revoke queues behind
    the renew's transaction; the interleaving the row lock guards against cannot happen
    there, and the test shows the queued order gives the same outcome.
    """
    for _ in range(200):
        await asyncio.sleep(0.01)
        assert not task.done(), task  # it must not get past the paused transaction
        if runtime.database.is_sqlite:
            return
        async with runtime.database.read() as connection:
            waiting = await connection.execute(
                text(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                    " AND wait_event_type = 'Lock'"
                )
            )
            if waiting.scalar_one():
                return
    raise AssertionError("the revoke never waited for the renew's transaction")


@pytest.mark.parametrize("revoker", ["revoke endpoint", "password change"])
async def test_a_renew_racing_the_revoke_of_its_refresh_token_leaves_no_live_access_token(
    runtime, client, monkeypatch, revoker
):
    """Renew found the refresh token live and is about to insert; the revoke comes in between.

    Whichever order the database settles on, the renew must not leave an access token that
    outlives the revocation: either the renew fails or the revoke also ends its token. (The
    services are called directly: the test client runs one request at a time.) RFC 7009's
    revoke waits on the client's throttle lock; a password change takes no such lock and
    meets the refresh token's row lock.
    """
    await account(runtime)
    session = await tokens_of_login(client)
    credentials = service.ClientCredentials(CLIENT_ID, CLIENT_SECRET)
    looked_up, go_on = asyncio.Event(), asyncio.Event()
    insert_access_token = auth_repository.insert_access_token

    async def paused_insert(connection, **values):
        looked_up.set()
        await go_on.wait()
        await insert_access_token(connection, **values)

    monkeypatch.setattr(auth_repository, "insert_access_token", paused_insert)
    renew = asyncio.create_task(
        service.renew(
            runtime, credentials, refresh_token=session["refresh_token"], client_address="test"
        )
    )
    await asyncio.wait_for(looked_up.wait(), 10)
    if revoker == "revoke endpoint":
        revoking = service.revoke(
            runtime, credentials, token=session["refresh_token"], client_address="test"
        )
    else:
        revoking = users_service.set_password(runtime, "ana@example.com", password="new-pass-1")
    revoke = asyncio.create_task(revoking)
    await _blocked_behind(runtime, revoke)
    go_on.set()
    renewed, revoked = await asyncio.wait_for(
        asyncio.gather(renew, revoke, return_exceptions=True), 20
    )
    monkeypatch.undo()

    assert revoked is None
    assert_oauth_error(await post_renew(client, session["refresh_token"]), "invalid_grant", 400)
    if isinstance(renewed, service.IssuedTokens):
        assert await me_status(client, renewed.access_token) == 401
    else:
        assert isinstance(renewed, OAuthError) and renewed.code == "invalid_grant", renewed
    async with runtime.database.read() as connection:
        live = await connection.execute(
            select(access_tokens.c.id).where(access_tokens.c.revoked_at.is_(None))
        )
        assert live.all() == []
