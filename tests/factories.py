"""Factories for clients, users and controllers, written through the real services."""

from __future__ import annotations

from functools import cache
from typing import Any

from argon2 import PasswordHasher
from litestar.testing import AsyncTestClient
from sqlalchemy import select

from devicecontrol.auth.clients import create_client
from devicecontrol.auth.passwords import active_hasher
from devicecontrol.clock import utcnow
from devicecontrol.controllers.provisioning import ControllerSpec, add_controller
from devicecontrol.database.tables import clients
from devicecontrol.runtime import Runtime
from devicecontrol.users import repository as users_repository
from devicecontrol.users.identity import username_key

CLIENT_ID = "test-app"
CLIENT_SECRET = "test-client-secret-0123456789"
PASSWORD = "correct horse battery staple"


@cache
def _password_hash_of(password: str, hasher: PasswordHasher) -> str:
    return hasher.hash(password)


def _password_hash(password: str) -> str:
    """argon2id is slow by design; tests reuse one real hash per password and hasher.

    Keyed on the active hasher: a test on the production parameters must get a hash that
    costs what production's do, not the cheap test profile's.
    """
    return _password_hash_of(password, active_hasher())


async def make_client(
    runtime: Runtime, client_id: str = CLIENT_ID, secret: str = CLIENT_SECRET
) -> str:
    return await create_client(runtime, client_id, secret=secret)


async def make_user(
    runtime: Runtime,
    email: str = "ana@example.com",
    *,
    password: str = PASSWORD,
    firstname: str = "Ana",
    lastname: str = "Petrova",
    phone: str | None = None,
) -> int:
    async with runtime.database.write() as connection:
        return await users_repository.insert_user(
            connection,
            username=email,
            username_key=username_key(email),
            password_hash=_password_hash(password),
            firstname=firstname,
            lastname=lastname,
            phone=phone,
            country_id=None,
            now=utcnow(),
        )


async def make_controller(runtime: Runtime, serial_number: str, **fields: Any) -> None:
    """A registered controller; a MAC is derived from the serial when none is given."""
    mac = fields.pop("mac", f"{abs(hash(serial_number)) % 16**12:012X}")
    fields.setdefault("type", "smart_plug")
    await add_controller(runtime, ControllerSpec(serial_number=serial_number, mac=mac, **fields))


async def login(
    client: AsyncTestClient,
    username: str = "ana@example.com",
    *,
    password: str = PASSWORD,
    client_id: str = CLIENT_ID,
    client_secret: str = CLIENT_SECRET,
) -> dict[str, Any]:
    """The auth object of a successful login (asserts that it succeeded)."""
    response = await client.post(
        "/v1/auth/login",
        json={
            "client_id": client_id,
            "client_secret": client_secret,
            "username": username,
            "password": password,
        },
    )
    assert response.status_code == 200, response.text
    return response.json()["auth"]


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


INVALID_TOKEN = 'Bearer realm="devicecontrol", error="invalid_token"'


async def me_status(client: AsyncTestClient, access_token: str) -> int:
    """GET /v1/users/me's status with this token; a 401 must say the token is invalid."""
    response = await client.get("/v1/users/me", headers=bearer(access_token))
    if response.status_code == 401:
        assert response.headers["www-authenticate"] == INVALID_TOKEN
    return response.status_code


async def logged_in_user(
    runtime: Runtime, client: AsyncTestClient, email: str = "ana@example.com"
) -> tuple[int, dict[str, str]]:
    """A new user (and the test client, if missing) with a ready Authorization header."""
    async with runtime.database.read() as connection:
        has_client = (
            await connection.execute(select(clients.c.id).where(clients.c.client_id == CLIENT_ID))
        ).first()
    if not has_client:
        await make_client(runtime)
    user_id = await make_user(runtime, email)
    auth = await login(client, email)
    return user_id, bearer(auth["access_token"])
