"""OAuth clients (the phone app, integrations): registered by operators, secret shown once."""

from __future__ import annotations

import re

from sqlalchemy.exc import IntegrityError

from devicecontrol.auth import repository, tokens
from devicecontrol.clock import utcnow
from devicecontrol.errors import Conflict, InvalidField
from devicecontrol.runtime import Runtime

_CLIENT_ID = re.compile(r"^[A-Za-z0-9._~-]{1,100}$")
# a given secret shorter than this is accepted (published apps carry theirs in their code,
# e.g. the original API's `mclimate` / `mclimate_core`) but the operator is warned
RECOMMENDED_SECRET_LENGTH = 16


def is_weak_secret(secret: str) -> bool:
    """True for a given secret short enough to be guessed or to name an app, not prove it."""
    return len(secret) < RECOMMENDED_SECRET_LENGTH


async def create_client(runtime: Runtime, client_id: str, *, secret: str | None = None) -> str:
    """Register a client; returns its secret (generated when none is given), stored as a digest."""
    if not _CLIENT_ID.match(client_id):
        raise InvalidField("client_id", "must be 1-100 characters of A-Z a-z 0-9 . _ ~ -")
    if secret is not None and not secret:
        raise InvalidField("secret", "must not be empty")
    secret = secret or tokens.new_client_secret()
    try:
        async with runtime.database.write() as connection:
            await repository.insert_client(
                connection, client_id=client_id, secret_digest=tokens.digest(secret), now=utcnow()
            )
    except IntegrityError:
        raise Conflict(f"a client named {client_id} already exists") from None
    return secret
