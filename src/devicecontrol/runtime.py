"""What every service call needs: settings, the database, the password-hashing limiter and
the access-token cache.

The HTTP app and the CLI each build one ``Runtime`` and hand it to the same services. It is
a plain class on purpose: Litestar then injects it as it is, without validating its fields.
"""

from __future__ import annotations

import os

import anyio

from devicecontrol.auth import passwords
from devicecontrol.auth.token_cache import TokenCache
from devicecontrol.config import Settings
from devicecontrol.database.engine import Database
from devicecontrol.notifications import Changes

# argon2 is CPU-bound (about 0.1 s a hash): at most half the cores hash at once per
# process, so that a login storm cannot take the cores the other requests need. On the
# 2-core bench machine that is one: a storm raises read p99 x1.7-2.4 with one, x2.5-3.5
# with two, at the same logins per second (docs/PERFORMANCE.md)
PASSWORD_HASHING_CONCURRENCY = max(1, (os.cpu_count() or 2) // 2)


class Runtime:
    def __init__(self, settings: Settings, database: Database) -> None:
        self.settings = settings
        self.database = database
        self.hashing_limiter = anyio.CapacityLimiter(PASSWORD_HASHING_CONCURRENCY)
        self.token_cache = TokenCache(settings.token_cache_ms)
        # commands made and finished, announced to every process (started by those that
        # listen: the HTTP app and the device link)
        self.changes = Changes(settings.database_url)

    @classmethod
    def from_settings(cls, settings: Settings) -> Runtime:
        """The runtime of a process; a test-only hashing profile becomes this process's."""
        if settings.password_hashing != passwords.STANDARD:
            passwords.use_hasher(passwords.HASHERS[settings.password_hashing])
        return cls(settings=settings, database=Database(settings.database_url))

    async def close(self) -> None:
        await self.changes.close()
        await self.database.dispose()
