"""The shape of a benchmark fleet: who owns which controller, and who holds tokens.

Pure arithmetic, so that provisioning and the scenarios agree without a database query.
A fixed group of "heavy" users each own exactly ``HEAVY_OWNED`` controllers at every fleet
size: their reads and list pages are what the fleet-size comparison measures, so only the
rest of the fleet grows around them.
"""

from __future__ import annotations

from dataclasses import dataclass

HEAVY_USERS = 10
HEAVY_OWNED = 100  # enough for a full list page of 100
CONTROLLERS_PER_USER = 10  # the rest of the fleet: 100k -> 10k users, 1M -> 100k users
TOKEN_HOLDERS = 1000  # users given an access and a refresh token (at most this many)
# access tokens in rotation at every fleet size: with fewer holders (100 users at 1k) each
# holds several, so that the token cache sees the same spread of tokens at every size
ACCESS_TOKENS = 1000
SERIAL_FORMAT = "BENCH-{:07d}"


@dataclass(frozen=True, slots=True)
class Fleet:
    controllers: int

    @property
    def users(self) -> int:
        return max(HEAVY_USERS, self.controllers // CONTROLLERS_PER_USER)

    @property
    def token_holders(self) -> int:
        return min(self.users, TOKEN_HOLDERS)

    @property
    def tokens_per_holder(self) -> int:
        return -(-ACCESS_TOKENS // self.token_holders)

    def owner(self, index: int) -> int | None:
        """The 1-based user id owning controller ``index`` (0-based), or None if unowned."""
        heavy_total = HEAVY_USERS * HEAVY_OWNED
        if index < heavy_total:
            return 1 + index // HEAVY_OWNED
        light_users = self.users - HEAVY_USERS
        if light_users <= 0:
            return None
        return 1 + HEAVY_USERS + (index - heavy_total) % light_users

    def owned_by(self, user_id: int) -> list[int]:
        """Controller indexes owned by one user (the inverse of ``owner``), in id order."""
        if user_id <= HEAVY_USERS:
            start = (user_id - 1) * HEAVY_OWNED
            return list(range(start, min(start + HEAVY_OWNED, self.controllers)))
        light_users = self.users - HEAVY_USERS
        first = HEAVY_USERS * HEAVY_OWNED + (user_id - 1 - HEAVY_USERS)
        return list(range(first, self.controllers, light_users))


def serial_number(index: int) -> str:
    return SERIAL_FORMAT.format(index)


def username(user_id: int) -> str:
    return f"user{user_id:07d}@bench.example"
