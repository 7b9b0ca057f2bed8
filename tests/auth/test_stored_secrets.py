"""Contract §2: tokens and client secrets are stored as SHA-256 digests, passwords as argon2id."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Table, select

from devicecontrol.auth.clients import create_client
from devicecontrol.database.tables import access_tokens, clients, refresh_tokens, users
from devicecontrol.users.service import create_user, set_password
from tests.auth.oauth import EMAIL, account, post_login, post_renew, sha256_hex
from tests.factories import CLIENT_ID, CLIENT_SECRET, PASSWORD


async def rows(runtime, table: Table) -> list[Any]:
    async with runtime.database.read() as connection:
        return list(await connection.execute(select(table)))


def stored_text(table_rows: list[Any]) -> str:
    """Every value of every row, as one string to search for a leaked secret."""
    return " ".join(str(value) for row in table_rows for value in row)


async def test_access_and_refresh_tokens_are_stored_only_as_sha256_digests(runtime, client):
    await account(runtime)
    auth = (await post_login(client)).json()["auth"]
    renewed = (await post_renew(client, auth["refresh_token"])).json()["auth"]
    access_rows = await rows(runtime, access_tokens)
    refresh_rows = await rows(runtime, refresh_tokens)
    assert {row.digest for row in access_rows} == {
        sha256_hex(auth["access_token"]),
        sha256_hex(renewed["access_token"]),
    }
    assert [row.digest for row in refresh_rows] == [sha256_hex(auth["refresh_token"])]
    everything = stored_text(access_rows + refresh_rows)
    for token in (auth["access_token"], auth["refresh_token"], renewed["access_token"]):
        assert token not in everything


async def test_client_secret_is_stored_only_as_a_sha256_digest(runtime):
    given = await create_client(runtime, "given-app", secret="a-given-secret-0123456789")
    generated = await create_client(runtime, "generated-app")
    client_rows = {row.client_id: row for row in await rows(runtime, clients)}
    assert client_rows["given-app"].secret_digest == sha256_hex(given)
    assert client_rows["generated-app"].secret_digest == sha256_hex(generated)
    everything = stored_text(list(client_rows.values()))
    assert given not in everything
    assert generated not in everything


async def test_generated_client_secret_works_for_login(runtime, client):
    await account(runtime)
    secret = await create_client(runtime, "generated-app")
    response = await post_login(client, client_id="generated-app", client_secret=secret)
    assert response.status_code == 200, response.text


async def test_password_is_stored_as_argon2id(runtime, client):
    await create_client(runtime, CLIENT_ID, secret=CLIENT_SECRET)
    await create_user(runtime, EMAIL, password=PASSWORD)
    (user,) = await rows(runtime, users)
    assert user.password_hash.startswith("$argon2id$")
    assert PASSWORD not in stored_text([user])
    assert (await post_login(client)).status_code == 200


async def test_new_password_is_stored_as_argon2id(runtime, client):
    await create_client(runtime, CLIENT_ID, secret=CLIENT_SECRET)
    await create_user(runtime, EMAIL, password=PASSWORD)
    await set_password(runtime, EMAIL, password="another long password")
    (user,) = await rows(runtime, users)
    assert user.password_hash.startswith("$argon2id$")
    assert "another long password" not in stored_text([user])
    assert (await post_login(client, password="another long password")).status_code == 200
