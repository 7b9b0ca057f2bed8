"""Accounts created at once: a shared new city never fails them; a shared name fails one.

The city's country record is written by whichever account comes first; on PostgreSQL two
transactions can both miss it and both insert it. That must not surface as "a user named
... already exists": only a real duplicate username may.
"""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import select

from devicecontrol.database.tables import countries, users
from devicecontrol.errors import Conflict
from devicecontrol.geo import find_place
from devicecontrol.runtime import Runtime
from devicecontrol.users import repository
from devicecontrol.users import service as users_service
from devicecontrol.users.service import create_user
from tests.factories import PASSWORD, _password_hash
from tests.lock_waits import until_waiting_on_a_lock

ROUNDS_CITIES = ["Plovdiv", "Varna", "Burgas", "Ruse", "Pleven"]


@pytest.fixture
def quick_hashing(monkeypatch: pytest.MonkeyPatch) -> None:
    """argon2 takes long enough to spread racing calls apart: reuse one real hash."""

    async def reuse_hash(password: str, **_: object) -> str:
        return _password_hash(password)

    monkeypatch.setattr(users_service, "hash_password_off_loop", reuse_hash)


async def city_records(runtime: Runtime) -> list[tuple[int, int]]:
    async with runtime.database.read() as connection:
        query = select(countries.c.id, countries.c.geoname_id).order_by(countries.c.id)
        return [tuple(row) for row in await connection.execute(query)]


async def country_of(runtime: Runtime, user_id: int) -> int | None:
    async with runtime.database.read() as connection:
        query = select(users.c.country_id).where(users.c.id == user_id)
        return (await connection.execute(query)).scalar_one()


async def test_a_user_created_while_another_transaction_adds_the_same_city_succeeds(
    runtime, quick_hashing
):
    """Deterministic: the city is inserted and left uncommitted until the creation waits."""
    plovdiv = find_place("BG", "Plovdiv")
    async with runtime.database.write() as connection:
        held_id = await repository.find_or_create_country(connection, plovdiv)
        creating = asyncio.create_task(
            create_user(runtime, "bob@example.com", password=PASSWORD, country="BG", city="Plovdiv")
        )
        await until_waiting_on_a_lock(runtime, creating)
    user_id = await creating
    assert await country_of(runtime, user_id) == held_id
    assert await city_records(runtime) == [(held_id, plovdiv.geoname_id)]


async def test_two_users_created_at_once_in_one_new_city_both_succeed(runtime, quick_hashing):
    for round_number, city in enumerate(ROUNDS_CITIES):
        created = await asyncio.gather(
            *(
                create_user(
                    runtime,
                    f"{name}{round_number}@example.com",
                    password=PASSWORD,
                    country="BG",
                    city=city,
                )
                for name in ("ana", "bob")
            )
        )
        country_ids = {await country_of(runtime, user_id) for user_id in created}
        assert len(created) == 2 and len(country_ids) == 1, city
    geoname_ids = [geoname_id for _, geoname_id in await city_records(runtime)]
    assert sorted(geoname_ids) == sorted(find_place("BG", c).geoname_id for c in ROUNDS_CITIES)


async def test_one_name_created_twice_at_once_in_a_new_city_fails_once_as_a_duplicate(
    runtime, quick_hashing
):
    for city in ROUNDS_CITIES:
        email = f"same-{city.lower()}@example.com"
        outcomes = await asyncio.gather(
            *(
                create_user(runtime, email, password=PASSWORD, country="BG", city=city)
                for _ in range(2)
            ),
            return_exceptions=True,
        )
        failures = [o for o in outcomes if isinstance(o, BaseException)]
        assert len(failures) == 1, outcomes
        assert isinstance(failures[0], Conflict)
        assert failures[0].detail == f"a user named {email} already exists"
