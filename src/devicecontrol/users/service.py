"""The rules of user accounts: the profile, creation, password changes and disabling."""

from __future__ import annotations

import re

from sqlalchemy import Row
from sqlalchemy.exc import IntegrityError

from devicecontrol.auth.passwords import hash_password_off_loop, password_problem
from devicecontrol.auth.repository import revoke_tokens_of_user
from devicecontrol.clock import utcnow
from devicecontrol.errors import Conflict, InvalidField, NotFound
from devicecontrol.geo import UnknownPlace, find_place
from devicecontrol.observability import audit
from devicecontrol.runtime import Runtime
from devicecontrol.users import repository
from devicecontrol.users.identity import email_problem, username_key

MAX_NAME_LENGTH = 100
_PHONE = re.compile(r"^\+?[0-9 ()\-.]{3,31}$")


async def get_profile(runtime: Runtime, user_id: int) -> Row:
    """The account and its country record's columns (None when it has none), in one row."""
    async with runtime.database.read() as connection:
        row = await repository.find_profile(connection, user_id)
    if row is None:  # the token check passed, so the account vanished in between
        raise NotFound("No such user.")
    return row


def _check_new_user(
    email: str, password: str, firstname: str, lastname: str, phone: str | None
) -> None:
    checks = [
        ("email", email_problem(email)),
        ("password", password_problem(password)),
        (
            "firstname",
            f"must be at most {MAX_NAME_LENGTH} characters"
            if len(firstname) > MAX_NAME_LENGTH
            else None,
        ),
        (
            "lastname",
            f"must be at most {MAX_NAME_LENGTH} characters"
            if len(lastname) > MAX_NAME_LENGTH
            else None,
        ),
        (
            "phone",
            "must be a phone number" if phone is not None and not _PHONE.match(phone) else None,
        ),
    ]
    for field, problem in checks:
        if problem:
            raise InvalidField(field, problem)


async def create_user(
    runtime: Runtime,
    email: str,
    *,
    password: str,
    firstname: str = "",
    lastname: str = "",
    phone: str | None = None,
    country: str | None = None,
    city: str | None = None,
) -> int:
    """A new active account; the country record is looked up in GeoNames first."""
    _check_new_user(email, password, firstname, lastname, phone)
    place = None
    if city is not None and country is None:
        raise InvalidField("city", "needs --country as well")
    if country is not None:
        try:
            place = find_place(country, city)
        except UnknownPlace as exc:
            raise InvalidField("country" if city is None else "city", str(exc)) from None
    password_hash = await hash_password_off_loop(password, limiter=runtime.hashing_limiter)
    try:
        async with runtime.database.write() as connection:
            country_id = (
                await repository.find_or_create_country(connection, place) if place else None
            )
            return await repository.insert_user(
                connection,
                username=email.strip(),
                username_key=username_key(email),
                password_hash=password_hash,
                firstname=firstname,
                lastname=lastname,
                phone=phone,
                country_id=country_id,
                now=utcnow(),
            )
    except IntegrityError:
        raise Conflict(f"a user named {email} already exists") from None


async def set_password(runtime: Runtime, email: str, *, password: str) -> None:
    """New password; every token of the user is revoked. Audited (an operator's command)."""
    problem = password_problem(password)
    if problem:
        raise InvalidField("password", problem)
    password_hash = await hash_password_off_loop(password, limiter=runtime.hashing_limiter)
    async with runtime.database.write() as connection:
        user = await repository.find_user(connection, username_key(email))
        if user is None:
            raise NotFound(f"no user named {email}")
        await repository.set_password_hash(connection, user.id, password_hash)
        await revoke_tokens_of_user(connection, user.id, utcnow())
    runtime.token_cache.forget_all()
    audit.record("password_change", audit.SUCCESS, user_id=user.id)


async def disable_user(runtime: Runtime, email: str) -> None:
    """The account can no longer log in, and its tokens are revoked. Audited."""
    async with runtime.database.write() as connection:
        user = await repository.find_user(connection, username_key(email))
        if user is None:
            raise NotFound(f"no user named {email}")
        now = utcnow()
        await repository.disable(connection, user.id, now)
        await revoke_tokens_of_user(connection, user.id, now)
    runtime.token_cache.forget_all()
    audit.record("user_disable", audit.SUCCESS, user_id=user.id)


async def revoke_user_tokens(runtime: Runtime, email: str) -> None:
    """Every token and web-app session of the account ends (``tokens revoke``). Audited."""
    async with runtime.database.write() as connection:
        user = await repository.find_user(connection, username_key(email))
        if user is None:
            raise NotFound(f"no user named {email}")
        await revoke_tokens_of_user(connection, user.id, utcnow())
    runtime.token_cache.forget_all()
    audit.record("tokens_revoke", audit.SUCCESS, user_id=user.id)
