"""The one query the demo needs: does the database hold any account or device yet?"""

from __future__ import annotations

from sqlalchemy import exists, select

from devicecontrol.database.engine import Reader
from devicecontrol.database.tables import clients, controllers, users


async def holds_any_record(connection: Reader) -> bool:
    """True once any client, user or controller exists: demo data goes only into none."""
    for table in (users, clients, controllers):
        if (await connection.execute(select(exists().select_from(table)))).scalar_one():
            return True
    return False
