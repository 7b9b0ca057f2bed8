"""Queries for user accounts and their country records. No rules here."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ColumnElement, Row, bindparam, func, insert, select, update
from sqlalchemy.dialects import postgresql, sqlite

from devicecontrol.database import prepared
from devicecontrol.database.engine import Reader, Writer
from devicecontrol.database.prepared import Prepared
from devicecontrol.database.tables import controllers, countries, users
from devicecontrol.geo import Place

# built once: read on every users/me call
_PROFILE = Prepared(
    select(
        users.c.id.label("user_id"),
        users.c.username,
        users.c.firstname,
        users.c.lastname,
        users.c.phone,
        users.c.country_id,
        users.c.created_at,
        countries.c.geoname_id,
        countries.c.continent_code,
        countries.c.continent_name,
        countries.c.country_code,
        countries.c.country_name,
        countries.c.city_name,
        countries.c.time_zone,
    )
    .outerjoin(countries, countries.c.id == users.c.country_id)
    .where(users.c.id == bindparam("user_id"))
)


async def find_profile(connection: Reader, user_id: int) -> Row | None:
    return (await prepared.execute(connection, _PROFILE, {"user_id": user_id})).first()


async def find_or_create_country(connection: Writer, place: Place) -> int:
    """One record per GeoNames city, shared by every user who lives there.

    Two transactions that create the same new city both insert it: the later insert waits
    for the first to commit and then does nothing (ON CONFLICT), and the look-up after it
    finds the first one's row. Neither fails on the city's unique key.
    """
    query = select(countries.c.id).where(countries.c.geoname_id == place.geoname_id)
    existing = (await connection.execute(query)).scalar_one_or_none()
    if existing is not None:
        return existing
    dialect = postgresql if connection.dialect.name == "postgresql" else sqlite
    result = await connection.execute(
        dialect.insert(countries)
        .values(
            geoname_id=place.geoname_id,
            continent_code=place.continent_code,
            continent_name=place.continent_name,
            country_code=place.country_code,
            country_name=place.country_name,
            city_name=place.city_name,
            time_zone=place.time_zone,
        )
        .on_conflict_do_nothing(index_elements=[countries.c.geoname_id])
        .returning(countries.c.id)
    )
    created = result.scalar_one_or_none()
    return created if created is not None else (await connection.execute(query)).scalar_one()


async def insert_user(
    connection: Writer,
    *,
    username: str,
    username_key: str,
    password_hash: str,
    firstname: str,
    lastname: str,
    phone: str | None,
    country_id: int | None,
    now: datetime,
) -> int:
    result = await connection.execute(
        insert(users)
        .values(
            username=username,
            username_key=username_key,
            password_hash=password_hash,
            firstname=firstname,
            lastname=lastname,
            phone=phone,
            country_id=country_id,
            created_at=now,
        )
        .returning(users.c.id)
    )
    return result.scalar_one()


async def find_user(connection: Writer, username_key: str) -> Row | None:
    query = select(users.c.id, users.c.disabled_at).where(users.c.username_key == username_key)
    return (await connection.execute(query)).first()


async def find_active_user_id(connection: Writer, username_key: str) -> int | None:
    query = select(users.c.id).where(
        users.c.username_key == username_key, users.c.disabled_at.is_(None)
    )
    return (await connection.execute(query)).scalar_one_or_none()


async def set_password_hash(connection: Writer, user_id: int, password_hash: str) -> None:
    await connection.execute(
        update(users).where(users.c.id == user_id).values(password_hash=password_hash)
    )


async def disable(connection: Writer, user_id: int, now: datetime) -> None:
    await connection.execute(
        update(users)
        .where(users.c.id == user_id, users.c.disabled_at.is_(None))
        .values(disabled_at=now)
    )


async def list_accounts(
    connection: Reader, *, disabled: bool | None, key_contains: str | None, limit: int
) -> tuple[list[Row], int]:
    """The first ``limit`` matching accounts in creation order, and how many match in all.

    Each row carries the account's place and ``controllers``, the number it owns; never
    the password hash.
    """
    conditions: list[ColumnElement[bool]] = []
    if disabled is not None:
        conditions.append(
            users.c.disabled_at.is_not(None) if disabled else users.c.disabled_at.is_(None)
        )
    if key_contains is not None:
        conditions.append(users.c.username_key.contains(key_contains, autoescape=True))
    owned = (
        select(func.count())
        .select_from(controllers)
        .where(controllers.c.user_id == users.c.id)
        .scalar_subquery()
    )
    query = (
        select(
            users.c.id,
            users.c.username,
            users.c.firstname,
            users.c.lastname,
            users.c.phone,
            users.c.created_at,
            users.c.disabled_at,
            countries.c.country_code,
            countries.c.city_name,
            owned.label("controllers"),
        )
        .outerjoin(countries, countries.c.id == users.c.country_id)
        .where(*conditions)
        .order_by(users.c.id)
        .limit(limit)
    )
    total = select(func.count()).select_from(users).where(*conditions)
    rows = list((await connection.execute(query)).all())
    return rows, (await connection.execute(total)).scalar_one()
