"""Contract §2: a disabled user's tokens stop working at once, whether or not they were revoked.

`users disable` also revokes every token, which would hide a token check that forgot the
account's state; so here the account is disabled in the database alone, tokens untouched.
"""

from __future__ import annotations

from sqlalchemy import update

from devicecontrol.clock import utcnow
from devicecontrol.database.tables import users
from tests.auth.oauth import account, assert_oauth_error, post_login, post_renew
from tests.factories import bearer


async def disable_without_revoking(runtime, user_id: int) -> None:
    async with runtime.database.write() as connection:
        await connection.execute(
            update(users).where(users.c.id == user_id).values(disabled_at=utcnow())
        )


async def test_a_disabled_users_unrevoked_access_token_is_refused(runtime, client):
    user_id = await account(runtime)
    auth = (await post_login(client)).json()["auth"]
    await disable_without_revoking(runtime, user_id)
    response = await client.get("/v1/users/me", headers=bearer(auth["access_token"]))
    assert response.status_code == 401
    assert 'error="invalid_token"' in response.headers["www-authenticate"]


async def test_a_disabled_users_unrevoked_refresh_token_renews_nothing(runtime, client):
    user_id = await account(runtime)
    auth = (await post_login(client)).json()["auth"]
    await disable_without_revoking(runtime, user_id)
    assert_oauth_error(await post_renew(client, auth["refresh_token"]), "invalid_grant", 400)


async def test_a_disabled_user_cannot_log_in_with_the_right_password(runtime, client):
    user_id = await account(runtime)
    await disable_without_revoking(runtime, user_id)
    assert_oauth_error(await post_login(client), "invalid_grant", 400)
