"""OAuth clients (the phone app, integrations): registered by operators, secret shown once."""

from __future__ import annotations

import re

from sqlalchemy import insert
from sqlalchemy.exc import IntegrityError

from devicecontrol.auth import tokens
from devicecontrol.clock import utcnow
from devicecontrol.errors import Conflict, InvalidField
from devicecontrol.runtime import Runtime
from devicecontrol.tables import clients

_CLIENT_ID = re.compile(r"^[A-Za-z0-9._~-]{1,100}$")
MIN_SECRET_LENGTH = 16


async def create_client(runtime: Runtime, client_id: str, *, secret: str | None = None) -> str:
    """Register a client; returns its secret (generated when none is given), stored as a digest."""
    if not _CLIENT_ID.match(client_id):
        raise InvalidField("client_id", "must be 1-100 characters of A-Z a-z 0-9 . _ ~ -")
    if secret is not None and len(secret) < MIN_SECRET_LENGTH:
        raise InvalidField("secret", f"must be at least {MIN_SECRET_LENGTH} characters")
    secret = secret or tokens.new_client_secret()
    try:
        async with runtime.database.write() as connection:
            await connection.execute(
                insert(clients).values(
                    client_id=client_id, secret_digest=tokens.digest(secret), created_at=utcnow()
                )
            )
    except IntegrityError:
        raise Conflict(f"a client named {client_id} already exists") from None
    return secret
