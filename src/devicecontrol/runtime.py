"""What every service call needs: settings, the database and the password-hashing limiter.

The HTTP app and the CLI each build one ``Runtime`` and hand it to the same services.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import anyio

from devicecontrol.config import Settings
from devicecontrol.db import Database

# argon2 is CPU-bound; never let more hashes run at once than there are cores to spare
PASSWORD_HASHING_CONCURRENCY = 2


@dataclass
class Runtime:
    settings: Settings
    database: Database
    hashing_limiter: anyio.CapacityLimiter = field(
        default_factory=lambda: anyio.CapacityLimiter(PASSWORD_HASHING_CONCURRENCY)
    )

    @classmethod
    def from_settings(cls, settings: Settings) -> Runtime:
        return cls(settings=settings, database=Database(settings.database_url))

    async def close(self) -> None:
        await self.database.dispose()
