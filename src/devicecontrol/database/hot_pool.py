"""PostgreSQL's hot statements on asyncpg's own pool: one round trip per statement.

The read engine (``engine.py``) pings every connection it hands out, so that a server restart
between requests costs no request an error: a round trip before each query. A hot read
(``prepared.Prepared``) instead runs on a connection of this pool, with no ping and no
reset round trip on its return, as one Bind/Execute/Sync on a statement asyncpg prepared
on that connection before. A connection that died with the server is found by the query
itself: the pool is told to replace all its connections and the statement runs once more,
which is safe because reads change nothing.

Driver errors are the driver's; ``db.PostgresReader`` names them as the database layer's
own, so that ``errors.py`` tells an outage (503) from a bug (500) as it does for every
other statement.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import asyncpg
from sqlalchemy.engine import Dialect, make_url

from devicecontrol.database.prepared import Prepared, PreparedResult

# the connections a process keeps for hot reads (besides the read and write engines')
HOT_POOL_SIZE = 8


async def _keep_session(_connection: asyncpg.Connection) -> None:
    """Nothing to reset: hot statements set no session state (asyncpg's default reset is
    a round trip on every return to the pool)."""


class HotPool:
    """The process's asyncpg pool for hot statements, opened on first use."""

    def __init__(
        self, database_url: str, dialect: Dialect, *, connect_timeout_s: float,
        command_timeout_s: float | None, acquire_timeout_s: float,
    ) -> None:  # fmt: skip
        url = make_url(database_url).set(drivername="postgresql")
        self._dsn = url.render_as_string(hide_password=False)
        self._dialect = dialect
        self._connect_timeout_s = connect_timeout_s
        self._command_timeout_s = command_timeout_s
        self._acquire_timeout_s = acquire_timeout_s
        self._pool: asyncpg.Pool | None = None
        self._opening = asyncio.Lock()

    async def _opened(self) -> asyncpg.Pool:
        async with self._opening:
            if self._pool is None:
                self._pool = await asyncpg.create_pool(
                    self._dsn,
                    min_size=0,
                    max_size=HOT_POOL_SIZE,
                    timeout=self._connect_timeout_s,
                    command_timeout=self._command_timeout_s,
                    reset=_keep_session,
                )
        return self._pool

    async def run(self, statement: Prepared, parameters: Mapping[str, Any]) -> PreparedResult:
        pool = self._pool or await self._opened()
        try:
            return await self._run_on(pool, statement, parameters)
        except TimeoutError:
            raise  # a stuck server or pool: trying again would only wait again
        except (asyncpg.InterfaceError, OSError):  # closed, reset, refused
            await pool.expire_connections()  # the server restarted: every one is dead
        return await self._run_on(pool, statement, parameters)  # once more, on a new one

    async def _run_on(
        self, pool: asyncpg.Pool, statement: Prepared, parameters: Mapping[str, Any]
    ) -> PreparedResult:
        async with pool.acquire(timeout=self._acquire_timeout_s) as connection:
            return await statement.run_asyncpg(self._dialect, connection, parameters)

    def usage(self) -> tuple[int, int]:
        """(connections in use, the most it opens), for /metrics."""
        if self._pool is None:
            return 0, HOT_POOL_SIZE
        return self._pool.get_size() - self._pool.get_idle_size(), HOT_POOL_SIZE

    async def close(self) -> None:
        if self._pool is not None:
            await self._pool.close()
            self._pool = None
