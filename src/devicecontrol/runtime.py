"""What every service call needs: settings, the database, the password-hashing limiter and
the access-token cache.

The HTTP app and the CLI each build one ``Runtime`` and hand it to the same services. It is
a plain class on purpose: Litestar then injects it as it is, without validating its fields.
"""

from __future__ import annotations

import anyio

from devicecontrol.auth.token_cache import TokenCache
from devicecontrol.config import Settings
from devicecontrol.db import Database

# argon2 is CPU-bound; never let more hashes run at once than there are cores to spare
PASSWORD_HASHING_CONCURRENCY = 2


class Runtime:
    def __init__(self, settings: Settings, database: Database) -> None:
        self.settings = settings
        self.database = database
        self.hashing_limiter = anyio.CapacityLimiter(PASSWORD_HASHING_CONCURRENCY)
        self.token_cache = TokenCache(settings.token_cache_ms)

    @classmethod
    def from_settings(cls, settings: Settings) -> Runtime:
        return cls(settings=settings, database=Database(settings.database_url))

    async def close(self) -> None:
        await self.database.dispose()
