"""The rules of login, renew and the bearer-token check."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from sqlalchemy import Row

from devicecontrol.auth import repository, tokens
from devicecontrol.auth.passwords import (
    hash_password_off_loop,
    needs_rehash,
    verify_password_off_loop,
)
from devicecontrol.auth.schemas import Caller
from devicecontrol.clock import utcnow
from devicecontrol.database.engine import Reader, Writer
from devicecontrol.errors import OAuthError, Unauthenticated
from devicecontrol.observability.audit import AuditEvent
from devicecontrol.runtime import Runtime
from devicecontrol.throttling import rules as throttling
from devicecontrol.throttling.rules import Subject
from devicecontrol.users import repository as users_repository
from devicecontrol.users.identity import username_key


@dataclass(frozen=True, slots=True)
class ClientCredentials:
    client_id: str
    client_secret: str


@dataclass(frozen=True, slots=True)
class IssuedTokens:
    access_token: str
    expires_in: int
    refresh_token: str | None = None


def _invalid_client() -> OAuthError:
    return OAuthError("invalid_client", "Unknown client or wrong client secret.")


async def _admit_client(
    connection: Writer,
    runtime: Runtime,
    credentials: ClientCredentials,
    event: AuditEvent,
    *,
    client_address: str,
) -> int | None:
    """The client's key, or None once the failure is recorded (the caller then refuses).

    Throttled per client id and per address before the secret is compared: published apps
    carry short secrets, which could otherwise be guessed at full speed. Call it in a write
    transaction that commits, so that the failure is kept.
    """
    settings = runtime.settings
    by_id = (throttling.CLIENT_ID, credentials.client_id)
    by_address = (throttling.CLIENT_ADDRESS, client_address)
    await throttling.ensure_allowed(
        connection,
        [
            (by_id, settings.throttle_client_per_id),
            (by_address, settings.throttle_client_per_address),
        ],
        utcnow(),
        what="client authentications",
    )
    client = await repository.find_client(connection, credentials.client_id)
    if client is not None:  # a client id that matched a record: safe to audit
        event.fields["client_id"] = credentials.client_id
    if tokens.matches_digest(credentials.client_secret, client.secret_digest if client else None):
        assert client is not None
        return client.id
    await throttling.record_failures(connection, [by_id, by_address], utcnow())
    return None


async def _admit_login(
    connection: Writer, runtime: Runtime, *, by_username: Subject, by_address: Subject
) -> tuple[list[int], Row | None]:
    """Throttle check for a password attempt, recorded as a failure until it proves right.

    Recorded with the check that let it through, so concurrent guesses cannot all slip past
    the limit. Returns the failure ids (to forget on success) and the user, if any.
    """
    settings = runtime.settings
    await throttling.ensure_allowed(
        connection,
        [
            (by_username, settings.throttle_login_per_username),
            (by_address, settings.throttle_login_per_address),
        ],
        utcnow(),
        what="logins",
    )
    attempt = await throttling.record_failures(connection, [by_username, by_address], utcnow())
    return attempt, await repository.find_login_user(connection, by_username[1])


async def _check_password(runtime: Runtime, user: Row | None, password: str) -> Row:
    """The user if the password is theirs and the account is active, else invalid_grant.

    An unknown user is verified against a dummy hash: same answer, about the same time.
    """
    valid = await verify_password_off_loop(
        user.password_hash if user else None, password, limiter=runtime.hashing_limiter
    )
    if user is None or not valid or user.disabled_at is not None:
        raise OAuthError("invalid_grant", "Wrong username or password.")
    return user


async def _issue_access_token(
    connection: Writer,
    runtime: Runtime,
    *,
    user_id: int,
    client_pk: int,
    refresh_token_id: int,
    now: datetime,
) -> str:
    """A new access token from a refresh token (login and renew); only its digest is kept."""
    access_token = tokens.new_token()
    await repository.insert_access_token(
        connection,
        token_digest=tokens.digest(access_token),
        user_id=user_id,
        client_pk=client_pk,
        refresh_token_id=refresh_token_id,
        now=now,
        expires_at=now + timedelta(seconds=runtime.settings.access_token_ttl),
    )
    return access_token


async def login(
    runtime: Runtime,
    credentials: ClientCredentials,
    *,
    username: str,
    password: str,
    client_address: str,
) -> IssuedTokens:
    """Resource-owner password grant: a new refresh token and access token for the user.

    The client, then the username and address, are throttle-checked before any password
    check. Audited, whatever the outcome.
    """
    with AuditEvent("login", user_id=None, client_id=None, client_address=client_address) as event:
        by_username = (throttling.LOGIN_USERNAME, username_key(username))
        by_address = (throttling.LOGIN_ADDRESS, client_address)
        async with runtime.database.write() as connection:
            client_pk = await _admit_client(
                connection, runtime, credentials, event, client_address=client_address
            )
            if client_pk is not None:
                attempt, user = await _admit_login(
                    connection, runtime, by_username=by_username, by_address=by_address
                )
        if client_pk is None:
            raise _invalid_client()
        if user is not None:
            event.fields["user_id"] = user.id
        user = await _check_password(runtime, user, password)
        new_hash = (
            await hash_password_off_loop(password, limiter=runtime.hashing_limiter)
            if needs_rehash(user.password_hash)
            else None
        )
        refresh_token, now = tokens.new_token(), utcnow()
        async with runtime.database.write() as connection:
            await throttling.clear_failures(connection, by_username)
            await throttling.forget_failures(connection, attempt)
            if new_hash:
                await users_repository.set_password_hash(connection, user.id, new_hash)
            refresh_id = await repository.insert_refresh_token(
                connection,
                token_digest=tokens.digest(refresh_token),
                user_id=user.id,
                client_pk=client_pk,
                now=now,
                expires_at=now + timedelta(seconds=runtime.settings.refresh_token_ttl),
            )
            access_token = await _issue_access_token(
                connection, runtime, user_id=user.id, client_pk=client_pk,
                refresh_token_id=refresh_id, now=now,
            )  # fmt: skip
        return IssuedTokens(access_token, runtime.settings.access_token_ttl, refresh_token)


async def authenticate_password(
    runtime: Runtime, *, username: str, password: str, client_address: str
) -> int:
    """The id of the account whose username and password these are (the web app's log-in),
    under the same throttles and answers as the token endpoint's password grant."""
    with AuditEvent("web_login", user_id=None, client_address=client_address) as event:
        by_username = (throttling.LOGIN_USERNAME, username_key(username))
        by_address = (throttling.LOGIN_ADDRESS, client_address)
        async with runtime.database.write() as connection:
            attempt, user = await _admit_login(
                connection, runtime, by_username=by_username, by_address=by_address
            )
        if user is not None:
            event.fields["user_id"] = user.id
        user = await _check_password(runtime, user, password)
        new_hash = (
            await hash_password_off_loop(password, limiter=runtime.hashing_limiter)
            if needs_rehash(user.password_hash)
            else None
        )
        async with runtime.database.write() as connection:
            await throttling.clear_failures(connection, by_username)
            await throttling.forget_failures(connection, attempt)
            if new_hash:
                await users_repository.set_password_hash(connection, user.id, new_hash)
        return int(user.id)


async def renew(
    runtime: Runtime, credentials: ClientCredentials, *, refresh_token: str, client_address: str
) -> IssuedTokens:
    """A new access token from a live refresh token of the same client; no rotation."""
    with AuditEvent("renew", user_id=None, client_id=None) as event:
        now = utcnow()
        async with runtime.database.write() as connection:
            client_pk = await _admit_client(
                connection, runtime, credentials, event, client_address=client_address
            )
            if client_pk is not None:
                grant = await repository.find_live_refresh_token(
                    connection, tokens.digest(refresh_token), now
                )
                if grant is None or grant.client_pk != client_pk:
                    raise OAuthError(
                        "invalid_grant", "The refresh token is invalid, expired or revoked."
                    )
                event.fields["user_id"] = grant.user_id
                access_token = await _issue_access_token(
                    connection, runtime, user_id=grant.user_id, client_pk=client_pk,
                    refresh_token_id=grant.id, now=now,
                )  # fmt: skip
        if client_pk is None:
            raise _invalid_client()
        return IssuedTokens(access_token, runtime.settings.access_token_ttl)


async def revoke(
    runtime: Runtime, credentials: ClientCredentials, *, token: str, client_address: str
) -> None:
    """RFC 7009 revocation of one of the client's own tokens, access or refresh.

    Unknown tokens, tokens already revoked and tokens of other clients all get the same
    silent success, so the endpoint tells nobody whether a token exists. Both kinds are
    looked for whatever ``token_type_hint`` says: a digest lookup is cheap.
    """
    with AuditEvent("revoke", client_id=None) as event:
        token_digest, now = tokens.digest(token), utcnow()
        async with runtime.database.write() as connection:
            client_pk = await _admit_client(
                connection, runtime, credentials, event, client_address=client_address
            )
            if client_pk is not None and not await repository.revoke_access_token(
                connection, token_digest, client_pk, now
            ):
                await repository.revoke_refresh_token(connection, token_digest, client_pk, now)
        if client_pk is None:
            raise _invalid_client()
        runtime.token_cache.forget_all()


def unknown_token() -> Unauthenticated:
    return Unauthenticated("The access token is unknown, expired or revoked.", invalid_token=True)


def bearer_token_digest(authorization: str | None) -> str:
    """The digest of an ``Authorization: Bearer`` header's token, or Unauthenticated."""
    scheme, _, credential = (authorization or "").strip().partition(" ")
    if not authorization or scheme.lower() != "bearer":
        raise Unauthenticated("A bearer access token is required.", invalid_token=False)
    credential = credential.strip()
    if len(credential) != 2 * tokens.TOKEN_BYTES:
        raise unknown_token()
    return tokens.digest(credential)


async def authenticate_bearer(runtime: Runtime, authorization: str | None) -> Caller:
    """The caller behind an ``Authorization: Bearer`` header, or Unauthenticated."""
    token_digest = bearer_token_digest(authorization)
    user_id = runtime.token_cache.user_of(token_digest)
    if user_id is None:
        async with runtime.database.read() as connection:
            live = await repository.find_live_access_token(connection, token_digest, utcnow())
        if live is None:
            raise unknown_token()
        user_id = live.user_id
        runtime.token_cache.remember(token_digest, live.user_id, live.expires_at)
    return Caller(user_id=user_id)


class TokenCheckedRow(Protocol):
    """A row of a read that ran the token check (``repository.live_access_token``) too."""

    token_user_id: int
    token_expires_at: datetime


ReadWithToken = Callable[[Reader, str, datetime], Awaitable[TokenCheckedRow | None]]


async def authenticate_bearer_reading(
    runtime: Runtime, authorization: str | None, read: ReadWithToken
) -> tuple[Caller, Any]:
    """``authenticate_bearer`` run inside the caller's own read, one statement in all.

    ``read(connection, token_digest, now)`` returns None when the token is not live. A token
    in the cache is not checked again: the row is then None and the caller reads alone.
    """
    token_digest = bearer_token_digest(authorization)
    user_id = runtime.token_cache.user_of(token_digest)
    if user_id is not None:
        return Caller(user_id=user_id), None
    async with runtime.database.read() as connection:
        row = await read(connection, token_digest, utcnow())
    if row is None:
        raise unknown_token()
    runtime.token_cache.remember(token_digest, row.token_user_id, row.token_expires_at)
    return Caller(user_id=row.token_user_id), row
