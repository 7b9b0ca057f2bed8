"""Opaque secrets: 160 random bits as 40 hex characters, stored only as SHA-256 digests."""

from __future__ import annotations

import hashlib
import hmac
import secrets

TOKEN_BYTES = 20  # 160 bits -> 40 hex characters


def new_token() -> str:
    return secrets.token_hex(TOKEN_BYTES)


def new_client_secret() -> str:
    return secrets.token_urlsafe(32)


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


def matches_digest(secret: str, stored_digest: str | None) -> bool:
    """Constant-time check of a presented secret against a stored digest."""
    presented = digest(secret)
    # without a stored digest, still do the comparison so the time taken is the same
    same = hmac.compare_digest(presented, stored_digest or "0" * len(presented))
    return same and stored_digest is not None
