"""`devicecontrol users create | set-password | disable`."""

from __future__ import annotations

import pytest

from devicecontrol.auth.passwords import verify_password
from devicecontrol.database.tables import access_tokens, countries, refresh_tokens, users
from tests.cli.support import (
    assert_one_line_error,
    assert_succeeded,
    cli,
    cli_process,
    rows,
    snapshot,
)
from tests.conftest import SQLITE_ENOUGH
from tests.factories import (
    CLIENT_ID,
    CLIENT_SECRET,
    PASSWORD,
    bearer,
    login,
    make_client,
    make_user,
)

pytestmark = SQLITE_ENOUGH

SOFIA = 727011


async def test_users_create_prompts_for_a_hidden_password_and_stores_only_its_hash(
    database_url, runtime, client
):
    await make_client(runtime)
    # a real process: the prompt reads a real pipe, not CliRunner's stand-in for getpass
    result = await cli_process(
        "users", "create", "Ana@Example.com", input="s3cret-pass\ns3cret-pass\n",
        database_url=database_url,
    )  # fmt: skip
    assert_succeeded(result)
    assert "s3cret-pass" not in result.stdout + result.stderr
    [user] = await rows(runtime, users)
    assert user.username == "Ana@Example.com"
    assert user.password_hash.startswith("$argon2id$")
    assert verify_password(user.password_hash, "s3cret-pass")
    auth = await login(client, "ana@example.com", password="s3cret-pass")
    assert len(auth["access_token"]) == 40


async def test_users_create_stores_every_option_and_the_geonames_country_record(
    database_url, runtime, client
):
    await make_client(runtime)
    result = await cli(
        "users", "create", "ana@example.com", "--password", PASSWORD, "--firstname", "Ana",
        "--lastname", "Petrova", "--phone", "+359 2 123 4567", "--country", "BG",
        "--city", "Sofia", database_url=database_url,
    )  # fmt: skip
    assert_succeeded(result)
    [user] = await rows(runtime, users)
    [country] = await rows(runtime, countries)
    assert (user.firstname, user.lastname, user.phone) == ("Ana", "Petrova", "+359 2 123 4567")
    assert user.country_id == country.id
    assert (country.geoname_id, country.country_code, country.city_name) == (SOFIA, "BG", "Sofia")
    assert (country.continent_code, country.continent_name) == ("EU", "Europe")
    assert (country.country_name, country.time_zone) == ("Bulgaria", "Europe/Sofia")
    token = (await login(client))["access_token"]
    response = await client.get(
        "/v1/users/me", headers={**bearer(token), "Accept-Response": "Advanced"}
    )
    assert response.json()["users"]["_relation"]["country"]["geoname_id"] == SOFIA


async def test_users_create_with_a_country_alone_places_the_user_in_its_capital(
    database_url, runtime
):
    result = await cli(
        "users", "create", "ana@example.com", "--password", PASSWORD, "--country", "bg",
        database_url=database_url,
    )  # fmt: skip
    assert_succeeded(result)
    assert [(c.geoname_id, c.city_name) for c in await rows(runtime, countries)] == [
        (SOFIA, "Sofia")
    ]


async def test_users_of_one_city_share_one_country_record(database_url, runtime):
    for email in ("ana@example.com", "ivan@example.com"):
        result = await cli(
            "users", "create", email, "--password", PASSWORD, "--country", "BG", "--city",
            "sofia", database_url=database_url,
        )  # fmt: skip
        assert_succeeded(result)
    [country] = await rows(runtime, countries)
    assert [user.country_id for user in await rows(runtime, users)] == [country.id, country.id]


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["new@example.com", "--country", "XX"], "unknown country"),
        (["new@example.com", "--country", "BG", "--city", "Atlantis"], "Atlantis"),
        (["new@example.com", "--city", "Sofia"], "--country"),
        (["not-an-email"], "e-mail"),
        (["two@@example.com"], "e-mail"),
        (["ana@localhost"], "e-mail"),
        (["ANA@Example.COM"], "already exists"),
        (["new@example.com", "--phone", "call me"], "phone"),
    ],
    ids=[
        "unknown country", "unknown city", "city without country", "no at sign", "two at signs",
        "no dot in domain", "duplicate in another case", "bad phone",
    ],
)  # fmt: skip
async def test_users_create_with_bad_input_fails_in_one_line_and_writes_nothing(
    args, fragment, database_url, runtime
):
    await make_user(runtime, "ana@example.com")
    before = await snapshot(runtime)
    result = await cli("users", "create", *args, "--password", PASSWORD, database_url=database_url)
    assert_one_line_error(result, fragment)
    assert await snapshot(runtime) == before


async def test_users_create_with_a_short_password_fails_and_writes_nothing(database_url, runtime):
    before = await snapshot(runtime)
    result = await cli(
        "users", "create", "new@example.com", "--password", "short", database_url=database_url
    )
    assert_one_line_error(result, "password")
    assert await snapshot(runtime) == before


async def two_sessions(runtime, client, email):
    """A user logged in twice, and the tokens of both logins."""
    await make_user(runtime, email)
    return [await login(client, email), await login(client, email)]


async def assert_tokens_dead(client, sessions):
    for auth in sessions:
        response = await client.get("/v1/users/me", headers=bearer(auth["access_token"]))
        assert response.status_code == 401
        assert 'error="invalid_token"' in response.headers["WWW-Authenticate"]
        renewed = await client.post(
            "/v1/auth/renew",
            json={
                "client_id": CLIENT_ID,
                "client_secret": CLIENT_SECRET,
                "refresh_token": auth["refresh_token"],
            },
        )
        assert renewed.status_code == 400
        assert renewed.json()["error"] == "invalid_grant"


async def assert_every_token_revoked(runtime, user_id, *, revoked: bool):
    for table in (access_tokens, refresh_tokens):
        found = await rows(runtime, table, table.c.user_id == user_id)
        assert found
        assert all((row.revoked_at is not None) is revoked for row in found)


async def test_users_set_password_changes_it_and_revokes_every_token_of_that_user_only(
    database_url, runtime, client
):
    await make_client(runtime)
    sessions = await two_sessions(runtime, client, "ana@example.com")
    other = await two_sessions(runtime, client, "ben@example.com")
    result = await cli(
        "users", "set-password", "ANA@example.com", input="brand-new-pass\nbrand-new-pass\n",
        database_url=database_url,
    )  # fmt: skip
    assert_succeeded(result)
    await assert_tokens_dead(client, sessions)
    [ana] = await rows(runtime, users, users.c.username_key == "ana@example.com")
    [ben] = await rows(runtime, users, users.c.username_key == "ben@example.com")
    await assert_every_token_revoked(runtime, ana.id, revoked=True)
    await assert_every_token_revoked(runtime, ben.id, revoked=False)
    old = await client.post(
        "/v1/auth/login",
        json={"client_id": CLIENT_ID, "client_secret": CLIENT_SECRET,
              "username": "ana@example.com", "password": PASSWORD},
    )  # fmt: skip
    assert old.status_code == 400
    await login(client, "ana@example.com", password="brand-new-pass")
    response = await client.get("/v1/users/me", headers=bearer(other[0]["access_token"]))
    assert response.status_code == 200


@pytest.mark.parametrize(
    ("email", "password", "fragment"),
    [("nobody@example.com", "brand-new-pass", "no user"), ("ana@example.com", "short", "password")],
    ids=["unknown user", "short password"],
)
async def test_users_set_password_with_bad_input_fails_and_changes_nothing(
    email, password, fragment, database_url, runtime, client
):
    await make_client(runtime)
    sessions = await two_sessions(runtime, client, "ana@example.com")
    before = await snapshot(runtime)
    result = await cli(
        "users", "set-password", email, "--password", password, database_url=database_url
    )
    assert_one_line_error(result, fragment)
    assert await snapshot(runtime) == before
    response = await client.get("/v1/users/me", headers=bearer(sessions[0]["access_token"]))
    assert response.status_code == 200


async def test_users_disable_stops_logins_and_revokes_every_token(database_url, runtime, client):
    await make_client(runtime)
    sessions = await two_sessions(runtime, client, "ana@example.com")
    other = await two_sessions(runtime, client, "ben@example.com")
    result = await cli("users", "disable", "Ana@Example.com", database_url=database_url)
    assert_succeeded(result)
    await assert_tokens_dead(client, sessions)
    [ana] = await rows(runtime, users, users.c.username_key == "ana@example.com")
    assert ana.disabled_at is not None
    await assert_every_token_revoked(runtime, ana.id, revoked=True)
    refused = await client.post(
        "/v1/auth/login",
        json={"client_id": CLIENT_ID, "client_secret": CLIENT_SECRET,
              "username": "ana@example.com", "password": PASSWORD},
    )  # fmt: skip
    assert refused.status_code == 400
    assert refused.json()["error"] == "invalid_grant"
    response = await client.get("/v1/users/me", headers=bearer(other[0]["access_token"]))
    assert response.status_code == 200


async def test_users_disable_of_an_unknown_user_fails_and_writes_nothing(database_url, runtime):
    await make_user(runtime, "ana@example.com")
    before = await snapshot(runtime)
    result = await cli("users", "disable", "nobody@example.com", database_url=database_url)
    assert_one_line_error(result, "nobody@example.com")
    assert await snapshot(runtime) == before
