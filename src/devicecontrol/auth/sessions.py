"""The rules of the web app's sessions: started by a password log-in, ended by log-out, a
password change, a revoke or a disabled account (auth.repository.revoke_tokens_of_user).

The browser holds the session's secret in a cookie; the database holds only its SHA-256
digest. A session lasts as long as an access token (DEVICECONTROL_ACCESS_TOKEN_TTL).
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from litestar.connection import ASGIConnection

from devicecontrol.auth import tokens, web_sessions
from devicecontrol.auth.service import authenticate_password
from devicecontrol.clock import utcnow
from devicecontrol.http.addresses import came_over_tls
from devicecontrol.runtime import Runtime

CSRF_CONTEXT = b"devicecontrol web app: proof of origin"
# over TLS the cookie carries the ``__Host-`` prefix: the browser takes it only with
# ``Secure``, ``Path=/`` and no ``Domain``, so a neighbouring subdomain (or a page over plain
# HTTP) cannot plant one beside ours; over plain HTTP (a laptop) it cannot be Secure, and the
# plain name is the development variant. A request is read under the name of its transport.
COOKIE_NAME = "devicecontrol_session"
TLS_COOKIE_NAME = "__Host-" + COOKIE_NAME


def cookie_name(over_tls: bool) -> str:
    return TLS_COOKIE_NAME if over_tls else COOKIE_NAME


@dataclass(frozen=True, slots=True)
class WebSession:
    """A live session: whose it is, until when, and its secret (the cookie's value)."""

    user_id: int
    expires_at: datetime
    secret: str

    @property
    def csrf_token(self) -> str:
        return csrf_token_of(self.secret)


def csrf_token_of(secret: str) -> str:
    """The proof a state-changing request carries in a header: derived from the session's
    secret, so it is bound to the session, and a page of another origin cannot read it."""
    return hmac.new(secret.encode(), CSRF_CONTEXT, hashlib.sha256).hexdigest()


def secret_in_cookie_headers(cookie_headers: list[str], *, over_tls: bool) -> str | None:
    """The session's secret in a request's ``Cookie`` headers, if there is exactly one under
    its transport's name. Two are no session, on every page and stream alike: which one a
    browser sends first depends on paths and ages, and one of them may be planted."""
    wanted = cookie_name(over_tls)
    found = [
        value.strip()
        for header in cookie_headers
        for name, _, value in (part.partition("=") for part in header.split(";"))
        if name.strip() == wanted
    ]
    return found[0] if len(found) == 1 else None


def session_secret(connection: ASGIConnection[Any, Any, Any, Any], runtime: Runtime) -> str | None:
    """A request's session secret, as every page and stream reads it: exactly one cookie
    under the name of the transport the browser used (directly or through a trusted proxy)."""
    over_tls = came_over_tls(connection, runtime.settings.trusted_proxies)
    return secret_in_cookie_headers(connection.headers.getall("cookie", []), over_tls=over_tls)


def is_valid_secret(secret: str | None) -> bool:
    return (
        secret is not None
        and len(secret) == 2 * tokens.TOKEN_BYTES
        and all(c in "0123456789abcdef" for c in secret)
    )


async def start_session(
    runtime: Runtime, *, username: str, password: str, client_address: str
) -> WebSession:
    """A new session for the account, or the token endpoint's own refusals (wrong username
    or password, 429 while throttled)."""
    user_id = await authenticate_password(
        runtime, username=username, password=password, client_address=client_address
    )
    secret, now = tokens.new_token(), utcnow()
    expires_at = now + timedelta(seconds=runtime.settings.access_token_ttl)
    async with runtime.database.write() as connection:
        await web_sessions.insert_session(
            connection,
            digest=tokens.digest(secret),
            user_id=user_id,
            now=now,
            expires_at=expires_at,
        )
    return WebSession(user_id, expires_at, secret)


async def find_session(runtime: Runtime, secret: str | None) -> WebSession | None:
    """The live session whose secret this is; None for anything else."""
    if not is_valid_secret(secret):
        return None
    assert secret is not None
    async with runtime.database.read() as connection:
        row = await web_sessions.find_live_session(connection, tokens.digest(secret), utcnow())
    return None if row is None else WebSession(row.user_id, row.expires_at, secret)


async def end_session(runtime: Runtime, secret: str) -> None:
    """Log-out: the session's row goes, so its cookie, replayed, opens nothing."""
    async with runtime.database.write() as connection:
        await web_sessions.delete_session(connection, tokens.digest(secret))
