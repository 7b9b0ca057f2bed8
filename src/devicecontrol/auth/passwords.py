"""argon2id password hashes. Verification runs off the event loop, bounded by a limiter."""

from __future__ import annotations

from functools import cache

import anyio
from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

# argon2id with the library's current recommended parameters
PRODUCTION_HASHER = PasswordHasher()
# the lowest cost argon2 accepts: test suites only (DEVICECONTROL_PASSWORD_HASHING)
TEST_ONLY_MINIMAL_HASHER = PasswordHasher(time_cost=1, memory_cost=8, parallelism=1)
STANDARD = "standard"
HASHERS = {STANDARD: PRODUCTION_HASHER, "test-only-minimal": TEST_ONLY_MINIMAL_HASHER}
_hasher = PRODUCTION_HASHER

MIN_PASSWORD_LENGTH = 8
MAX_PASSWORD_LENGTH = 1024


def use_hasher(hasher: PasswordHasher) -> PasswordHasher:
    """Make ``hasher`` the one every call uses; returns the one it replaces.

    For the test suite, which runs with cheap parameters (production cost would be half
    its time) and puts PRODUCTION_HASHER back where a test is about the real cost, and for
    ``Runtime.from_settings`` when DEVICECONTROL_PASSWORD_HASHING names the test profile.
    """
    global _hasher
    previous, _hasher = _hasher, hasher
    return previous


def active_hasher() -> PasswordHasher:
    """The hasher in use: what a hash made now must match (tests key cached hashes on it)."""
    return _hasher


def hash_password(password: str) -> str:
    return _hasher.hash(password)


@cache
def _dummy_hash_of(hasher: PasswordHasher) -> str:
    return hasher.hash("not-a-real-password-but-costs-the-same")


def _dummy_hash() -> str:
    """A hash to verify against when the user does not exist, so timing reveals nothing.

    Made once per hasher: it must cost what the active hasher's hashes cost.
    """
    return _dummy_hash_of(_hasher)


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
