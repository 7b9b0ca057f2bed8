"""GET /users/me, basic and advanced (contract §3)."""

from __future__ import annotations

import re
from datetime import datetime

import pytest
from sqlalchemy import select, update

from devicecontrol.clock import utcnow
from devicecontrol.database.tables import countries, users
from devicecontrol.users.service import create_user
from tests.conftest import SQLITE_ENOUGH
from tests.factories import PASSWORD, bearer, logged_in_user, login, make_client

pytestmark = SQLITE_ENOUGH

BASIC_FIELDS = {
    "user_id",
    "username",
    "firstname",
    "lastname",
    "phone",
    "country_id",
    "created",
}
COUNTRY_FIELDS = {
    "id",
    "geoname_id",
    "continent_code",
    "continent_name",
    "country_code",
    "country_name",
    "city_name",
    "time_zone",
}
LINKS = {
    "self": {"href": "/v1/users/me"},
    "controller": {"href": "/v1/controllers/{serial_number}", "templated": True},
}
SOFIA = {
    "geoname_id": 727011,
    "continent_code": "EU",
    "continent_name": "Europe",
    "country_code": "BG",
    "country_name": "Bulgaria",
    "city_name": "Sofia",
    "time_zone": "Europe/Sofia",
}


async def sofia_user(runtime, client, email: str = "ana@example.com") -> dict[str, str]:
    """A user created as the CLI creates one, living in Sofia; her Authorization header."""
    await make_client(runtime)
    await create_user(
        runtime,
        email,
        password=PASSWORD,
        firstname="Ana",
        lastname="Petrova",
        phone="+359 2 123 4567",
        country="BG",
        city="Sofia",
    )
    return bearer((await login(client, email))["access_token"])


async def test_basic_form_has_exactly_the_shown_fields(runtime, client):
    user_id, headers = await logged_in_user(runtime, client)
    response = await client.get("/v1/users/me", headers=headers)
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/hal+json"
    body = response.json()
    assert set(body) == {"users", "_links"}
    assert set(body["users"]) == BASIC_FIELDS
    assert body["users"]["user_id"] == user_id
    assert body["users"]["username"] == "ana@example.com"
    assert body["users"]["firstname"] == "Ana"
    assert body["users"]["lastname"] == "Petrova"
    assert body["users"]["phone"] is None
    assert body["users"]["country_id"] is None


async def test_links_are_self_and_a_templated_controller_link(runtime, client):
    _, headers = await logged_in_user(runtime, client)
    for accept_response in (None, "Advanced"):
        extra = {"Accept-Response": accept_response} if accept_response else {}
        response = await client.get("/v1/users/me", headers={**headers, **extra})
        assert response.json()["_links"] == LINKS


async def test_created_is_utc_in_the_contract_format(runtime, client):
    before = utcnow()
    _, headers = await logged_in_user(runtime, client)
    after = utcnow()
    created = (await client.get("/v1/users/me", headers=headers)).json()["users"]["created"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", created)
    moment = datetime.strptime(created, "%Y-%m-%d %H:%M:%S")
    assert before <= moment <= after


async def test_created_shows_the_stored_creation_time(runtime, client):
    user_id, headers = await logged_in_user(runtime, client)
    async with runtime.database.write() as connection:
        await connection.execute(
            update(users)
            .where(users.c.id == user_id)
            .values(created_at=datetime(2026, 1, 2, 3, 4, 5))
        )
    created = (await client.get("/v1/users/me", headers=headers)).json()["users"]["created"]
    assert created == "2026-01-02 03:04:05"


@pytest.mark.parametrize("value", ["Advanced", "advanced", "ADVANCED", "aDvAnCeD"])
async def test_accept_response_advanced_in_any_case_adds_the_relation(runtime, client, value):
    headers = await sofia_user(runtime, client)
    response = await client.get("/v1/users/me", headers={**headers, "Accept-Response": value})
    assert response.status_code == 200
    profile = response.json()["users"]
    assert set(profile) == BASIC_FIELDS | {"_relation"}
    assert set(profile["_relation"]) == {"country"}
    assert set(profile["_relation"]["country"]) == COUNTRY_FIELDS


@pytest.mark.parametrize("value", ["Basic", "", "Advance", "Advanced-ish", "full", "true"])
async def test_other_accept_response_values_give_the_basic_form(runtime, client, value):
    headers = await sofia_user(runtime, client)
    response = await client.get("/v1/users/me", headers={**headers, "Accept-Response": value})
    assert response.status_code == 200
    assert set(response.json()["users"]) == BASIC_FIELDS


async def test_advanced_form_keeps_the_basic_fields_unchanged(runtime, client):
    headers = await sofia_user(runtime, client)
    basic = (await client.get("/v1/users/me", headers=headers)).json()["users"]
    advanced = (
        await client.get("/v1/users/me", headers={**headers, "Accept-Response": "Advanced"})
    ).json()["users"]
    relation = advanced.pop("_relation")
    assert advanced == basic
    assert relation["country"]["id"] == basic["country_id"]


async def test_user_without_country_has_null_country_id_and_null_relation(runtime, client):
    _, headers = await logged_in_user(runtime, client)
    response = await client.get("/v1/users/me", headers={**headers, "Accept-Response": "Advanced"})
    profile = response.json()["users"]
    assert profile["country_id"] is None
    assert profile["_relation"] == {"country": None}


async def test_country_record_comes_from_geonames(runtime, client):
    headers = await sofia_user(runtime, client)
    response = await client.get("/v1/users/me", headers={**headers, "Accept-Response": "Advanced"})
    profile = response.json()["users"]
    country = profile["_relation"]["country"]
    assert isinstance(profile["country_id"], int)
    assert country == {"id": profile["country_id"], **SOFIA}


async def test_profile_shows_what_the_user_was_created_with(runtime, client):
    headers = await sofia_user(runtime, client, email="Ana.Petrova@Example.com")
    profile = (await client.get("/v1/users/me", headers=headers)).json()["users"]
    assert profile["username"] == "Ana.Petrova@Example.com"
    assert profile["firstname"] == "Ana"
    assert profile["lastname"] == "Petrova"
    assert profile["phone"] == "+359 2 123 4567"


async def test_users_of_one_city_share_one_country_record(runtime, client):
    ana = await sofia_user(runtime, client)
    await create_user(runtime, "bob@example.com", password=PASSWORD, country="bg", city="sofia")
    bob = bearer((await login(client, "bob@example.com"))["access_token"])
    advanced = {"Accept-Response": "Advanced"}
    ana_country = (await client.get("/v1/users/me", headers={**ana, **advanced})).json()
    bob_country = (await client.get("/v1/users/me", headers={**bob, **advanced})).json()
    assert ana_country["users"]["_relation"] == bob_country["users"]["_relation"]
    async with runtime.database.read() as connection:
        assert len(list(await connection.execute(select(countries)))) == 1


async def test_country_without_city_is_its_capital(runtime, client):
    await make_client(runtime)
    await create_user(runtime, "ana@example.com", password=PASSWORD, country="BG")
    headers = bearer((await login(client))["access_token"])
    response = await client.get("/v1/users/me", headers={**headers, "Accept-Response": "Advanced"})
    country = response.json()["users"]["_relation"]["country"]
    assert country["geoname_id"] == SOFIA["geoname_id"]
    assert country["time_zone"] == "Europe/Sofia"


async def test_profile_is_the_callers_own(runtime, client):
    ana_id, ana = await logged_in_user(runtime, client)
    bob_id, bob = await logged_in_user(runtime, client, "bob@example.com")
    assert (await client.get("/v1/users/me", headers=ana)).json()["users"]["user_id"] == ana_id
    bob_profile = (await client.get("/v1/users/me", headers=bob)).json()["users"]
    assert bob_profile["user_id"] == bob_id
    assert bob_profile["username"] == "bob@example.com"
    assert ana_id != bob_id


@pytest.mark.parametrize(
    ("country", "city", "expected"),
    [
        ("US", "Los Angeles", (5368361, "NA", "North America", "America/Los_Angeles")),
        ("AU", "Perth", (2063523, "OC", "Oceania", "Australia/Perth")),
    ],
)
async def test_time_zone_and_geoname_id_are_the_citys_own(runtime, client, country, city, expected):
    await make_client(runtime)
    await create_user(runtime, "ana@example.com", password=PASSWORD, country=country, city=city)
    headers = bearer((await login(client))["access_token"])
    response = await client.get("/v1/users/me", headers={**headers, "Accept-Response": "Advanced"})
    record = response.json()["users"]["_relation"]["country"]
    shown = (record["geoname_id"], record["continent_code"], record["continent_name"])
    assert (*shown, record["time_zone"]) == expected
    assert (record["country_code"], record["city_name"]) == (country, city)
