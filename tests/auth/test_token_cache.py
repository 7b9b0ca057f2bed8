"""The access-token cache (auth/token_cache.py): bounded staleness, never a stale answer
where the revocation was made.

A second ``Runtime`` on the same database plays the other process (as the CLI would): what
it revokes, the app learns only from the database. The two-process versions are in
tests/e2e/test_two_processes.py.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta

import pytest
from litestar.testing import AsyncTestClient
from sqlalchemy import update

from devicecontrol.auth.token_cache import TokenCache
from devicecontrol.clock import utcnow
from devicecontrol.config import MAX_TOKEN_CACHE_MS, Settings
from devicecontrol.database.tables import access_tokens
from tests.apps import lent_client
from tests.auth.oauth import account, post_login
from tests.factories import CLIENT_ID, CLIENT_SECRET, me_status

SHORT_TTL_MS = 300


@pytest.fixture
async def cached_client(database_url) -> AsyncIterator[AsyncTestClient]:
    settings = Settings(database_url=database_url, token_cache_ms=SHORT_TTL_MS)
    async with lent_client(settings) as client:
        yield client


@pytest.fixture
async def uncached_client(database_url) -> AsyncIterator[AsyncTestClient]:
    settings = Settings(database_url=database_url, token_cache_ms=0)
    async with lent_client(settings) as client:
        yield client


async def access_token(client: AsyncTestClient) -> str:
    response = await post_login(client)
    assert response.status_code == 200, response.text
    return response.json()["auth"]["access_token"]


async def revoke_out_of_band(runtime) -> None:
    """What another process's revocation looks like from here: a row in the database."""
    async with runtime.database.write() as connection:
        await connection.execute(update(access_tokens).values(revoked_at=utcnow()))


async def test_a_token_revoked_elsewhere_is_served_from_the_cache_until_its_ttl_ends(
    runtime, cached_client, clock
):
    """Time is moved, not waited for: just before the TTL ends and just after it."""
    await account(runtime)
    token = await access_token(cached_client)
    assert await me_status(cached_client, token) == 200  # checked once: now cached
    await revoke_out_of_band(runtime)
    # the cache is really in the path (the database already says no) ...
    assert await me_status(cached_client, token) == 200
    clock.advance(SHORT_TTL_MS / 1000 - 0.001)
    assert await me_status(cached_client, token) == 200, "served for less than its TTL"
    # ... and it lets go when its TTL ends, well inside the one-second bound
    clock.advance(0.002)
    assert await me_status(cached_client, token) == 401, "revoked token still served"


async def test_with_the_cache_off_a_revocation_elsewhere_holds_on_the_next_request(
    runtime, uncached_client
):
    await account(runtime)
    token = await access_token(uncached_client)
    assert await me_status(uncached_client, token) == 200
    await revoke_out_of_band(runtime)
    assert await me_status(uncached_client, token) == 401


async def test_a_revocation_made_by_this_process_holds_at_once(runtime, cached_client):
    await account(runtime)
    token = await access_token(cached_client)
    assert await me_status(cached_client, token) == 200
    revoked = await cached_client.post(
        "/v1/auth/revoke",
        data={"client_id": CLIENT_ID, "client_secret": CLIENT_SECRET, "token": token},
    )
    assert revoked.status_code == 200, revoked.text
    assert await me_status(cached_client, token) == 401


async def test_a_cached_token_past_its_expiry_is_refused_at_once(runtime, database_url, clock):
    """The token expires while its cache entry is still fresh: the entry must not outlive it."""
    await account(runtime)
    settings = Settings(database_url=database_url, token_cache_ms=MAX_TOKEN_CACHE_MS)
    async with lent_client(settings) as cached_for_a_second:
        token = await access_token(cached_for_a_second)
        clock.advance(0.5)  # utcnow() is second precision: now the expiry below is 0.5 s away
        async with runtime.database.write() as connection:
            await connection.execute(
                update(access_tokens).values(expires_at=utcnow() + timedelta(seconds=1))
            )
        # the cache has not seen it yet: this call reads (and caches) the new expiry
        assert await me_status(cached_for_a_second, token) == 200
        clock.advance(0.499)
        assert await me_status(cached_for_a_second, token) == 200
        clock.advance(0.002)  # past the expiry, with about half the entry's TTL left
        assert await me_status(cached_for_a_second, token) == 401


def test_an_entry_is_served_only_until_the_token_expires():
    cache = TokenCache(MAX_TOKEN_CACHE_MS)
    now = utcnow()
    cache.remember("live", 7, now + timedelta(hours=1))
    cache.remember("expired", 8, now - timedelta(seconds=1))
    assert cache.user_of("live") == 7
    assert cache.user_of("expired") is None
    assert cache.user_of("never seen") is None
    cache.forget_all()
    assert cache.user_of("live") is None


def test_an_entry_is_served_for_the_ttl_and_not_after(clock):
    cache = TokenCache(SHORT_TTL_MS)
    cache.remember("live", 7, utcnow() + timedelta(hours=1))
    clock.advance(SHORT_TTL_MS / 1000 - 0.001)
    assert cache.user_of("live") == 7
    clock.advance(0.002)
    assert cache.user_of("live") is None


def test_a_cache_of_zero_ms_keeps_nothing():
    cache = TokenCache(0)
    cache.remember("live", 7, utcnow() + timedelta(hours=1))
    assert cache.user_of("live") is None


@pytest.mark.parametrize("ttl_ms", [-1, MAX_TOKEN_CACHE_MS + 1])
def test_a_cache_outside_the_bound_cannot_be_made(ttl_ms):
    with pytest.raises(ValueError, match="0 to 1000 ms"):
        TokenCache(ttl_ms)
