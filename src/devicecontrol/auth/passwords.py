"""argon2id password hashes. Verification runs off the event loop, bounded by a limiter."""

from __future__ import annotations

from functools import cache

import anyio
from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

_hasher = PasswordHasher()  # argon2id with the library's current recommended parameters

MIN_PASSWORD_LENGTH = 8
MAX_PASSWORD_LENGTH = 1024


def hash_password(password: str) -> str:
    return _hasher.hash(password)


@cache
def _dummy_hash() -> str:
    """A hash to verify against when the user does not exist, so timing reveals nothing."""
    return _hasher.hash("not-a-real-password-but-costs-the-same")


def verify_password(stored_hash: str | None, password: str) -> bool:
    try:
        return _hasher.verify(stored_hash or _dummy_hash(), password) and stored_hash is not None
    except (VerificationError, InvalidHashError):
        return False


def needs_rehash(stored_hash: str) -> bool:
    """True when the hash was made with parameters other than today's."""
    return _hasher.check_needs_rehash(stored_hash)


async def verify_password_off_loop(
    stored_hash: str | None, password: str, *, limiter: anyio.CapacityLimiter
) -> bool:
    return await anyio.to_thread.run_sync(verify_password, stored_hash, password, limiter=limiter)


async def hash_password_off_loop(password: str, *, limiter: anyio.CapacityLimiter) -> str:
    return await anyio.to_thread.run_sync(hash_password, password, limiter=limiter)


def password_problem(password: str) -> str | None:
    """Why a new password is unacceptable, or None."""
    if len(password) < MIN_PASSWORD_LENGTH:
        return f"must be at least {MIN_PASSWORD_LENGTH} characters"
    if len(password) > MAX_PASSWORD_LENGTH:
        return f"must be at most {MAX_PASSWORD_LENGTH} characters"
    if "\x00" in password:
        return "must not contain NUL characters"
    return None
