"""Failed client authentication is throttled per client id and per address (contract §5).

Given secrets may be short (published apps carry theirs in their code), so an unknown client
id or a wrong secret on login, renew and revoke counts like a failed login: at the limit
the next attempt is 429 with Retry-After, before the secret is compared, even when it is
right.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import httpx
import pytest

from devicecontrol.config import Settings, SettingsError, ThrottleRule, load_settings
from tests.asgi import app_client
from tests.factories import CLIENT_ID, CLIENT_SECRET, PASSWORD, make_client, make_user

ANA = "ana@example.com"
SHORT_ID, SHORT_SECRET = "mclimate", "mclimate_core"
LIMIT = 3


def limited(settings: Settings, *, per_id: int = LIMIT, per_address: int = 100) -> Settings:
    return replace(
        settings,
        throttle_client_per_id=ThrottleRule(per_id, 60),
        throttle_client_per_address=ThrottleRule(per_address, 60),
    )


async def token_request(
    http: httpx.AsyncClient, endpoint: str, client_id: str, secret: str, **fields: Any
) -> httpx.Response:
    body = {"client_id": client_id, "client_secret": secret, **fields}
    defaults = {
        "login": {"username": ANA, "password": PASSWORD},
        "renew": {"refresh_token": "0" * 40},
        "revoke": {"token": "0" * 40},
    }[endpoint]
    return await http.post(f"/v1/auth/{endpoint}", data={**defaults, **body})


def assert_throttled(response: httpx.Response) -> None:
    assert response.status_code == 429, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    assert response.headers["cache-control"] == "no-store"
    assert 1 <= int(response.headers["retry-after"]) <= 61


def assert_invalid_client(response: httpx.Response) -> None:
    assert response.status_code == 401, response.text
    assert response.json()["error"] == "invalid_client"


@pytest.fixture
async def accounts(runtime) -> None:
    await make_client(runtime)
    await make_client(runtime, SHORT_ID, SHORT_SECRET)
    await make_user(runtime, ANA)


@pytest.mark.parametrize("endpoint", ["login", "renew", "revoke"])
async def test_wrong_secrets_of_a_client_are_throttled_then_even_the_right_one_is_429(
    settings, accounts, endpoint
):
    async with app_client(limited(settings), peer="203.0.113.7") as http:
        for _ in range(LIMIT):
            assert_invalid_client(await token_request(http, endpoint, SHORT_ID, "guess"))
        assert_throttled(await token_request(http, endpoint, SHORT_ID, "guess"))
        # the right secret is not even compared: a throttled guess learns nothing
        assert_throttled(await token_request(http, endpoint, SHORT_ID, SHORT_SECRET))
        # another client is not affected
        ok = await token_request(http, "login", CLIENT_ID, CLIENT_SECRET)
        assert ok.status_code == 200, ok.text


async def test_the_client_id_count_is_shared_by_every_endpoint_and_address(settings, accounts):
    rules = limited(settings)
    async with app_client(rules, peer="203.0.113.7") as first:
        assert_invalid_client(await token_request(first, "login", SHORT_ID, "guess-1"))
        assert_invalid_client(await token_request(first, "renew", SHORT_ID, "guess-2"))
    async with app_client(rules, peer="198.51.100.9") as second:
        assert_invalid_client(await token_request(second, "revoke", SHORT_ID, "guess-3"))
        assert_throttled(await token_request(second, "login", SHORT_ID, SHORT_SECRET))


async def test_failures_from_one_address_are_throttled_whatever_client_id_they_name(
    settings, accounts
):
    rules = limited(settings, per_id=100, per_address=LIMIT)
    async with app_client(rules, peer="203.0.113.7") as guesser:
        for number in range(LIMIT):
            response = await token_request(guesser, "login", f"no-such-app-{number}", "x")
            assert_invalid_client(response)
        assert_throttled(await token_request(guesser, "login", CLIENT_ID, CLIENT_SECRET))
    async with app_client(rules, peer="198.51.100.9") as bystander:
        response = await token_request(bystander, "login", CLIENT_ID, CLIENT_SECRET)
        assert response.status_code == 200, response.text


async def test_right_client_credentials_are_never_counted(settings, accounts):
    async with app_client(limited(settings), peer="203.0.113.7") as http:
        for _ in range(LIMIT + 2):
            response = await token_request(http, "login", SHORT_ID, SHORT_SECRET)
            assert response.status_code == 200, response.text
            refresh = response.json()["auth"]["refresh_token"]
            renewed = await token_request(
                http, "renew", SHORT_ID, SHORT_SECRET, refresh_token=refresh
            )
            assert renewed.status_code == 200, renewed.text


def test_the_client_rules_are_configurable_and_default_to_the_documented_values():
    assert load_settings({}).throttle_client_per_id == ThrottleRule(30, 60)
    assert load_settings({}).throttle_client_per_address == ThrottleRule(20, 60)
    configured = load_settings(
        {
            "DEVICECONTROL_THROTTLE_CLIENT_PER_ID": "7/120",
            "DEVICECONTROL_THROTTLE_CLIENT_PER_ADDRESS": "4/30",
        }
    )
    assert configured.throttle_client_per_id == ThrottleRule(7, 120)
    assert configured.throttle_client_per_address == ThrottleRule(4, 30)
    with pytest.raises(SettingsError, match="THROTTLE_CLIENT_PER_ID"):
        load_settings({"DEVICECONTROL_THROTTLE_CLIENT_PER_ID": "many"})
