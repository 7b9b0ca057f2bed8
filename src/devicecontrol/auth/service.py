"""The rules of login, renew and the bearer-token check."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from devicecontrol import throttling
from devicecontrol.auth import repository, tokens
from devicecontrol.auth.passwords import (
    hash_password_off_loop,
    needs_rehash,
    verify_password_off_loop,
)
from devicecontrol.auth.schemas import Caller
from devicecontrol.clock import utcnow
from devicecontrol.errors import OAuthError, Unauthenticated
from devicecontrol.observability.audit import AuditEvent
from devicecontrol.runtime import Runtime
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


async def _authenticate_client(
    runtime: Runtime, credentials: ClientCredentials, event: AuditEvent
) -> int:
    async with runtime.database.read() as connection:
        client = await repository.find_client(connection, credentials.client_id)
    if client is not None:  # a client id that matched a record: safe to audit
        event.fields["client_id"] = credentials.client_id
    if not tokens.matches_digest(
        credentials.client_secret, client.secret_digest if client else None
    ):
        raise OAuthError("invalid_client", "Unknown client or wrong client secret.")
    assert client is not None
    return client.id


async def login(
    runtime: Runtime,
    credentials: ClientCredentials,
    *,
    username: str,
    password: str,
    client_address: str,
) -> IssuedTokens:
    """Resource-owner password grant: a new refresh token and access token for the user.

    Failures are throttled per username and per client address before any password check.
    Audited, whatever the outcome.
    """
    with AuditEvent("login", user_id=None, client_id=None, client_address=client_address) as event:
        return await _login(
            runtime,
            credentials,
            event,
            username=username,
            password=password,
            client_address=client_address,
        )


async def _login(
    runtime: Runtime,
    credentials: ClientCredentials,
    event: AuditEvent,
    *,
    username: str,
    password: str,
    client_address: str,
) -> IssuedTokens:
    client_pk = await _authenticate_client(runtime, credentials, event)
    settings = runtime.settings
    by_username = (throttling.LOGIN_USERNAME, username_key(username))
    by_address = (throttling.LOGIN_ADDRESS, client_address)
    async with runtime.database.write() as connection:
        await throttling.ensure_allowed(
            connection,
            [
                (by_username, settings.throttle_login_per_username),
                (by_address, settings.throttle_login_per_address),
            ],
            utcnow(),
            what="logins",
        )
        # the attempt counts as a failure until the password proves right, recorded with the
        # check that let it through: concurrent guesses cannot all slip past the limit
        attempt = await throttling.record_failures(connection, [by_username, by_address], utcnow())
        user = await repository.find_login_user(connection, by_username[1])
    if user is not None:
        event.fields["user_id"] = user.id
    # an unknown user is verified against a dummy hash: same answer, about the same time
    valid = await verify_password_off_loop(
        user.password_hash if user else None, password, limiter=runtime.hashing_limiter
    )
    if user is None or not valid or user.disabled_at is not None:
        raise OAuthError("invalid_grant", "Wrong username or password.")
    new_hash = (
        await hash_password_off_loop(password, limiter=runtime.hashing_limiter)
        if needs_rehash(user.password_hash)
        else None
    )
    access_token, refresh_token, now = tokens.new_token(), tokens.new_token(), utcnow()
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
            expires_at=now + timedelta(seconds=settings.refresh_token_ttl),
        )
        await repository.insert_access_token(
            connection,
            token_digest=tokens.digest(access_token),
            user_id=user.id,
            client_pk=client_pk,
            refresh_token_id=refresh_id,
            now=now,
            expires_at=now + timedelta(seconds=settings.access_token_ttl),
        )
    return IssuedTokens(access_token, settings.access_token_ttl, refresh_token)


async def renew(
    runtime: Runtime, credentials: ClientCredentials, *, refresh_token: str
) -> IssuedTokens:
    """A new access token from a live refresh token of the same client; no rotation."""
    with AuditEvent("renew", user_id=None, client_id=None) as event:
        return await _renew(runtime, credentials, event, refresh_token=refresh_token)


async def _renew(
    runtime: Runtime, credentials: ClientCredentials, event: AuditEvent, *, refresh_token: str
) -> IssuedTokens:
    client_pk = await _authenticate_client(runtime, credentials, event)
    settings = runtime.settings
    access_token, now = tokens.new_token(), utcnow()
    async with runtime.database.write() as connection:
        grant = await repository.find_live_refresh_token(
            connection, tokens.digest(refresh_token), now
        )
        if grant is None or grant.client_pk != client_pk:
            raise OAuthError("invalid_grant", "The refresh token is invalid, expired or revoked.")
        event.fields["user_id"] = grant.user_id
        await repository.insert_access_token(
            connection,
            token_digest=tokens.digest(access_token),
            user_id=grant.user_id,
            client_pk=client_pk,
            refresh_token_id=grant.id,
            now=now,
            expires_at=now + timedelta(seconds=settings.access_token_ttl),
        )
    return IssuedTokens(access_token, settings.access_token_ttl)


async def revoke(runtime: Runtime, credentials: ClientCredentials, *, token: str) -> None:
    """RFC 7009 revocation of one of the client's own tokens, access or refresh.

    Unknown tokens, tokens already revoked and tokens of other clients all get the same
    silent success, so the endpoint tells nobody whether a token exists. Both kinds are
    looked for whatever ``token_type_hint`` says: a digest lookup is cheap.
    """
    with AuditEvent("revoke", client_id=None) as event:
        client_pk = await _authenticate_client(runtime, credentials, event)
        token_digest, now = tokens.digest(token), utcnow()
        async with runtime.database.write() as connection:
            if not await repository.revoke_access_token(connection, token_digest, client_pk, now):
                await repository.revoke_refresh_token(connection, token_digest, client_pk, now)
        runtime.token_cache.forget_all()


async def authenticate_bearer(runtime: Runtime, authorization: str | None) -> Caller:
    """The caller behind an ``Authorization: Bearer`` header, or Unauthenticated."""
    scheme, _, credential = (authorization or "").strip().partition(" ")
    if not authorization or scheme.lower() != "bearer":
        raise Unauthenticated("A bearer access token is required.", invalid_token=False)
    credential = credential.strip()
    user_id = None
    if len(credential) == 2 * tokens.TOKEN_BYTES:
        token_digest = tokens.digest(credential)
        user_id = runtime.token_cache.user_of(token_digest)
        if user_id is None:
            async with runtime.database.read() as connection:
                live = await repository.find_live_access_token(connection, token_digest, utcnow())
            if live is not None:
                user_id = live.user_id
                runtime.token_cache.remember(token_digest, live.user_id, live.expires_at)
    if user_id is None:
        raise Unauthenticated(
            "The access token is unknown, expired or revoked.", invalid_token=True
        )
    return Caller(user_id=user_id)
