"""Access tokens this process checked moments ago, so that a polling client's calls skip
the token query.

Every process keeps its own. An entry is served for at most ``ttl_ms`` (the setting
``DEVICECONTROL_TOKEN_CACHE_MS``, 500 by default, never more than 1000, 0 turns the cache
off) after the database said the token was live; after that the next call asks again. So
a token revoked anywhere (revoke, a password change, a disabled account) stops working on
every process within ``ttl_ms`` plus one query, inside the one second the performance
issue allows; tests/e2e/test_token_cache.py measures it across two processes. A revocation
made by this process forgets every entry at once. Unknown tokens are never cached: a guess
costs a query, and a token issued a moment ago cannot have been asked about before.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from cachetools import TTLCache

from devicecontrol import clock
from devicecontrol.config import MAX_TOKEN_CACHE_MS

# one entry is about 300 bytes: at most ~30 MB, far more tokens than one process sees in
# half a second; past it the oldest entries go first
TOKEN_CACHE_ENTRIES = 100_000


@dataclass(frozen=True, slots=True)
class LiveToken:
    user_id: int
    expires_at: float  # POSIX seconds


class TokenCache:
    def __init__(self, ttl_ms: int, *, entries: int = TOKEN_CACHE_ENTRIES) -> None:
        if not 0 <= ttl_ms <= MAX_TOKEN_CACHE_MS:
            raise ValueError(f"token cache TTL must be 0 to {MAX_TOKEN_CACHE_MS} ms")
        self.enabled = ttl_ms > 0
        # both clocks come from devicecontrol.clock, so tests can age entries without sleeping
        self._entries: TTLCache[str, LiveToken] = TTLCache(
            maxsize=entries, ttl=max(ttl_ms, 1) / 1000, timer=clock.monotonic
        )

    def user_of(self, token_digest: str) -> int | None:
        """The user id of a token the database called live less than ``ttl_ms`` ago."""
        entry = self._entries.get(token_digest) if self.enabled else None
        if entry is None or entry.expires_at <= clock.timestamp():
            return None
        return entry.user_id

    def remember(self, token_digest: str, user_id: int, expires_at: datetime) -> None:
        """``expires_at`` is naive UTC, as the tables store it."""
        if self.enabled:
            self._entries[token_digest] = LiveToken(
                user_id, expires_at.replace(tzinfo=UTC).timestamp()
            )

    def forget_all(self) -> None:
        """After this process revoked tokens: no entry may outlive the revocation here."""
        self._entries.clear()
