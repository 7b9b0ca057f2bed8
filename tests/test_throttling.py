"""Failed logins and claim codes are throttled: 429 with Retry-After, counted in the database."""

from __future__ import annotations

from dataclasses import replace
from ipaddress import ip_network

import httpx
from sqlalchemy import func, select

from devicecontrol.config import ThrottleRule
from devicecontrol.database.tables import throttle_failures
from devicecontrol.runtime import Runtime
from tests.asgi import app_client
from tests.factories import (
    CLIENT_ID,
    CLIENT_SECRET,
    PASSWORD,
    bearer,
    login,
    make_client,
    make_controller,
    make_user,
)

ANA = "ana@example.com"
PROXY = "10.1.2.3"
PEER = "203.0.113.7"  # the socket address requests come from, unless a test says


async def attempt_login(
    http: httpx.AsyncClient, username: str = ANA, password: str = "wrong password", **headers: str
) -> httpx.Response:
    body = {
        "client_id": CLIENT_ID,
        "client_secret": CLIENT_SECRET,
        "username": username,
        "password": password,
    }
    return await http.post("/v1/auth/login", data=body, headers=headers)


def assert_throttled(response: httpx.Response, window_s: int) -> None:
    assert response.status_code == 429, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    assert response.json()["status"] == 429
    assert 1 <= int(response.headers["retry-after"]) <= window_s + 1


async def account(runtime: Runtime, email: str = ANA) -> None:
    await make_client(runtime)
    await make_user(runtime, email)


async def test_failed_logins_per_username_are_throttled_even_for_the_right_password(
    runtime, settings
):
    await account(runtime)
    limited = replace(settings, throttle_login_per_username=ThrottleRule(3, 900))
    async with app_client(limited, peer=PEER) as http:
        for _ in range(3):
            assert (await attempt_login(http)).status_code == 400
        response = await attempt_login(http, password=PASSWORD)
    assert_throttled(response, 900)
    assert response.headers["cache-control"] == "no-store"


async def test_a_successful_login_clears_the_usernames_failures(runtime, settings):
    await account(runtime)
    limited = replace(settings, throttle_login_per_username=ThrottleRule(3, 900))
    async with app_client(limited, peer=PEER) as http:
        for _ in range(2):
            await attempt_login(http)
        assert (await attempt_login(http, password=PASSWORD)).status_code == 200
        for _ in range(2):
            assert (await attempt_login(http)).status_code == 400
        assert (await attempt_login(http, password=PASSWORD)).status_code == 200


async def test_failed_logins_per_address_are_throttled_across_usernames(runtime, settings):
    await account(runtime)
    limited = replace(settings, throttle_login_per_address=ThrottleRule(3, 60))
    async with app_client(limited, peer="198.51.100.1") as http:
        for n in range(3):
            assert (await attempt_login(http, username=f"guess{n}@example.com")).status_code == 400
        assert_throttled(await attempt_login(http, password=PASSWORD), 60)
    async with app_client(limited, peer="198.51.100.2") as other_address:
        assert (await attempt_login(other_address, password=PASSWORD)).status_code == 200


async def test_forwarded_for_is_ignored_from_an_untrusted_peer(runtime, settings):
    await account(runtime)
    limited = replace(settings, throttle_login_per_address=ThrottleRule(2, 60))
    async with app_client(limited, peer="198.51.100.1") as http:
        for n in range(2):
            spoofed = {"X-Forwarded-For": f"192.0.2.{n}"}
            await attempt_login(http, username=f"guess{n}@example.com", **spoofed)
        response = await attempt_login(
            http, username="x@example.com", **{"X-Forwarded-For": "192.0.2.99"}
        )
    assert_throttled(response, 60)


async def test_forwarded_for_from_a_trusted_proxy_names_the_client(runtime, settings):
    await account(runtime)
    limited = replace(
        settings,
        throttle_login_per_address=ThrottleRule(2, 60),
        trusted_proxies=(ip_network(PROXY),),
    )
    async with app_client(limited, peer=PROXY) as http:
        for n in range(2):
            await attempt_login(
                http, username=f"guess{n}@example.com", **{"X-Forwarded-For": "192.0.2.1"}
            )
        throttled = await attempt_login(http, password=PASSWORD, **{"X-Forwarded-For": "192.0.2.1"})
        other_client = await attempt_login(
            http, password=PASSWORD, **{"X-Forwarded-For": "192.0.2.1, 192.0.2.2"}
        )
    assert_throttled(throttled, 60)
    assert other_client.status_code == 200


async def test_login_failures_are_shared_by_every_process_on_the_database(runtime, settings):
    """Two app instances (as two server processes would) count into the same rows."""
    await account(runtime)
    limited = replace(settings, throttle_login_per_username=ThrottleRule(2, 900))
    async with app_client(limited, peer=PEER) as first, app_client(limited, peer=PEER) as second:
        await attempt_login(first)
        await attempt_login(second)
        assert_throttled(await attempt_login(first, password=PASSWORD), 900)
        assert_throttled(await attempt_login(second, password=PASSWORD), 900)


async def test_throttling_ends_when_the_window_has_passed(runtime, settings, clock):
    await account(runtime)
    limited = replace(settings, throttle_login_per_username=ThrottleRule(1, 2))
    async with app_client(limited, peer=PEER) as http:
        await attempt_login(http)
        throttled = await attempt_login(http, password=PASSWORD)
        assert_throttled(throttled, 2)
        clock.advance(int(throttled.headers["retry-after"]))  # as a client told to wait would
        assert (await attempt_login(http, password=PASSWORD)).status_code == 200


async def test_only_a_digest_of_the_throttled_subject_is_stored(runtime, settings):
    await account(runtime)
    async with app_client(settings, peer=PEER) as http:
        await attempt_login(http, username="Someone.Secret@example.com")
    async with runtime.database.read() as connection:
        rows = (await connection.execute(select(throttle_failures))).all()
    assert {row.scope for row in rows} == {"login_username", "login_address"}
    assert all(len(row.subject_digest) == 64 and "@" not in row.subject_digest for row in rows)


async def claim(http: httpx.AsyncClient, headers: dict[str, str], serial: str, code: str | None):
    body = {} if code is None else {"claim_code": code}
    return await http.post(f"/v1/controllers/{serial}/assign", json=body, headers=headers)


async def test_wrong_claim_codes_per_controller_are_throttled_even_for_the_right_code(
    runtime, settings
):
    await account(runtime)
    await make_user(runtime, "bob@example.com")
    await make_controller(runtime, "CLAIM1", claim_code="right-code")
    limited = replace(settings, throttle_claim_per_controller=ThrottleRule(3, 900))
    async with app_client(limited, peer=PEER) as http:
        ana = bearer((await login(http, ANA))["access_token"])
        bob = bearer((await login(http, "bob@example.com"))["access_token"])
        assert (await claim(http, ana, "CLAIM1", None)).status_code == 403
        for _ in range(2):
            assert (await claim(http, ana, "CLAIM1", "guess")).status_code == 403
        assert_throttled(await claim(http, bob, "CLAIM1", "right-code"), 900)
    async with runtime.database.read() as connection:
        owner = await connection.execute(
            select(func.count()).where(throttle_failures.c.scope == "claim_controller")
        )
        assert owner.scalar_one() == 3


async def test_wrong_claim_codes_per_user_are_throttled_across_controllers(runtime, settings):
    await account(runtime)
    for n in range(4):
        await make_controller(runtime, f"CLAIM{n}", claim_code=f"code-{n}")
    limited = replace(settings, throttle_claim_per_user=ThrottleRule(3, 900))
    async with app_client(limited, peer=PEER) as http:
        ana = bearer((await login(http, ANA))["access_token"])
        for n in range(3):
            assert (await claim(http, ana, f"CLAIM{n}", "guess")).status_code == 403
        assert_throttled(await claim(http, ana, "CLAIM3", "code-3"), 900)


async def test_claims_without_a_code_are_not_throttled(runtime, settings):
    await account(runtime)
    await make_controller(runtime, "LOCKED", claim_code="right-code")
    await make_controller(runtime, "OPEN1")
    limited = replace(settings, throttle_claim_per_user=ThrottleRule(1, 900))
    async with app_client(limited, peer=PEER) as http:
        ana = bearer((await login(http, ANA))["access_token"])
        assert (await claim(http, ana, "LOCKED", "guess")).status_code == 403
        assert (await claim(http, ana, "OPEN1", None)).status_code == 200
