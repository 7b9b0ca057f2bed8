"""Queries for clients, users' credentials and tokens. No rules here."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ColumnElement, Row, bindparam, insert, select, update

from devicecontrol.auth import web_sessions
from devicecontrol.database import prepared
from devicecontrol.database.engine import Reader, Writer
from devicecontrol.database.prepared import Prepared
from devicecontrol.database.tables import access_tokens, clients, refresh_tokens, users


async def find_client(connection: Reader, client_id: str) -> Row | None:
    query = select(clients.c.id, clients.c.secret_digest).where(clients.c.client_id == client_id)
    return (await connection.execute(query)).first()


async def insert_client(
    connection: Writer, *, client_id: str, secret_digest: str, now: datetime
) -> None:
    await connection.execute(
        insert(clients).values(client_id=client_id, secret_digest=secret_digest, created_at=now)
    )


async def find_login_user(connection: Writer, username_key: str) -> Row | None:
    query = select(users.c.id, users.c.password_hash, users.c.disabled_at).where(
        users.c.username_key == username_key
    )
    return (await connection.execute(query)).first()


async def insert_refresh_token(
    connection: Writer,
    *,
    token_digest: str,
    user_id: int,
    client_pk: int,
    now: datetime,
    expires_at: datetime,
) -> int:
    result = await connection.execute(
        insert(refresh_tokens)
        .values(
            digest=token_digest,
            user_id=user_id,
            client_pk=client_pk,
            created_at=now,
            expires_at=expires_at,
        )
        .returning(refresh_tokens.c.id)
    )
    return result.scalar_one()


async def insert_access_token(
    connection: Writer,
    *,
    token_digest: str,
    user_id: int,
    client_pk: int,
    refresh_token_id: int | None,
    now: datetime,
    expires_at: datetime,
) -> None:
    await connection.execute(
        insert(access_tokens).values(
            digest=token_digest,
            user_id=user_id,
            client_pk=client_pk,
            refresh_token_id=refresh_token_id,
            created_at=now,
            expires_at=expires_at,
        )
    )


async def find_live_refresh_token(
    connection: Writer, token_digest: str, now: datetime
) -> Row | None:
    """The unexpired, unrevoked refresh token with this digest, if its user is still active.

    The row stays locked until the caller's transaction ends (PostgreSQL; SQLite's write
    transactions are serial anyway), so a revoke cannot slip in between this check and the
    access token the caller then issues from it.
    """
    query = (
        select(refresh_tokens.c.id, refresh_tokens.c.user_id, refresh_tokens.c.client_pk)
        .join(users, users.c.id == refresh_tokens.c.user_id)
        .where(
            refresh_tokens.c.digest == token_digest,
            refresh_tokens.c.revoked_at.is_(None),
            refresh_tokens.c.expires_at > now,
            users.c.disabled_at.is_(None),
        )
        .with_for_update(of=refresh_tokens)
    )
    return (await connection.execute(query)).first()


# What makes an access token live, said once: its digest is known, it is neither revoked
# nor expired, and its user is not disabled. The token check below runs it alone; the
# controller read (controllers/repository.py) runs it in its own statement, so that a
# read is one round trip to the database.
LIVE_ACCESS_TOKENS = access_tokens.join(users, users.c.id == access_tokens.c.user_id)


def live_access_token() -> tuple[ColumnElement[bool], ...]:
    """The conditions on ``LIVE_ACCESS_TOKENS``; parameters ``token_digest`` and ``now``."""
    return (
        access_tokens.c.digest == bindparam("token_digest"),
        access_tokens.c.revoked_at.is_(None),
        access_tokens.c.expires_at > bindparam("now"),
        users.c.disabled_at.is_(None),
    )


# built once: the token check runs on every call
_LIVE_ACCESS_TOKEN = Prepared(
    select(access_tokens.c.user_id, access_tokens.c.expires_at)
    .select_from(LIVE_ACCESS_TOKENS)
    .where(*live_access_token())
)


async def find_live_access_token(
    connection: Reader, token_digest: str, now: datetime
) -> Row | None:
    """User id and expiry of a live access token of an active user: the check on every call."""
    parameters = {"token_digest": token_digest, "now": now}
    return (await prepared.execute(connection, _LIVE_ACCESS_TOKEN, parameters)).first()


async def revoke_tokens_of_user(connection: Writer, user_id: int, now: datetime) -> None:
    """Every token of the user and every web-app session of theirs ends.

    Refresh tokens first: a renew holding one (``FOR UPDATE``) finishes before they are
    revoked, and the access tokens it issued are then caught by the second statement."""
    for table in (refresh_tokens, access_tokens):
        await connection.execute(
            update(table)
            .where(table.c.user_id == user_id, table.c.revoked_at.is_(None))
            .values(revoked_at=now)
        )
    await web_sessions.delete_sessions_of_user(connection, user_id)


async def revoke_access_token(
    connection: Writer, token_digest: str, client_pk: int, now: datetime
) -> bool:
    """Revoke the client's own access token with this digest; False if there is none."""
    result = await connection.execute(
        update(access_tokens)
        .where(
            access_tokens.c.digest == token_digest,
            access_tokens.c.client_pk == client_pk,
            access_tokens.c.revoked_at.is_(None),
        )
        .values(revoked_at=now)
    )
    return result.rowcount > 0


async def revoke_refresh_token(
    connection: Writer, token_digest: str, client_pk: int, now: datetime
) -> bool:
    """Revoke the client's own refresh token and every access token issued from it."""
    refresh_id = (
        await connection.execute(
            update(refresh_tokens)
            .where(
                refresh_tokens.c.digest == token_digest,
                refresh_tokens.c.client_pk == client_pk,
                refresh_tokens.c.revoked_at.is_(None),
            )
            .values(revoked_at=now)
            .returning(refresh_tokens.c.id)
        )
    ).scalar_one_or_none()
    if refresh_id is None:
        return False
    await connection.execute(
        update(access_tokens)
        .where(access_tokens.c.refresh_token_id == refresh_id, access_tokens.c.revoked_at.is_(None))
        .values(revoked_at=now)
    )
    return True
