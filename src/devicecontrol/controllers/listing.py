"""``controllers list``: the registry as the operators see it, narrowed by filters.

Filters are checked before any query, so a typo is an error rather than an empty table.
An owner named by e-mail must have an account (a disabled one counts: its controllers are
still registered to it).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Row
from sqlalchemy.sql.elements import ColumnElement

from devicecontrol.controllers import registry
from devicecontrol.controllers.identity import is_serial_number
from devicecontrol.errors import BadRequest, InvalidField
from devicecontrol.runtime import Runtime
from devicecontrol.tables import controllers
from devicecontrol.users.identity import email_problem, username_key

MAX_TYPE_LENGTH = 64


@dataclass(frozen=True, slots=True)
class ControllerFilters:
    owner: str | None = None  # an e-mail
    unowned: bool = False
    type: str | None = None
    serial_prefix: str | None = None
    online: bool | None = None


def _checked(filters: ControllerFilters) -> None:
    if filters.owner is not None and filters.unowned:
        raise BadRequest("owner and unowned exclude each other: give one of them")
    if filters.owner is not None and (problem := email_problem(filters.owner)) is not None:
        raise InvalidField("owner", problem)
    if filters.serial_prefix is not None and not is_serial_number(filters.serial_prefix):
        raise InvalidField("serial_prefix", "must be 1-64 characters of A-Z a-z 0-9 _ -")
    if filters.type is not None:
        if not filters.type.strip() or len(filters.type) > MAX_TYPE_LENGTH:
            raise InvalidField("type", f"must be 1-{MAX_TYPE_LENGTH} characters")
        if "\x00" in filters.type:
            raise InvalidField("type", "must not contain NUL characters")


async def list_controllers(
    runtime: Runtime, filters: ControllerFilters, *, limit: int
) -> tuple[list[Row], int]:
    """The first ``limit`` matching controllers in registration order, and the total."""
    _checked(filters)
    conditions: list[ColumnElement[bool]] = []
    async with runtime.database.read() as connection:
        if filters.owner is not None:
            key = username_key(filters.owner)
            account = (await registry.accounts_by_key(connection, [key])).get(key)
            if account is None:
                raise InvalidField("owner", f"no account is named {filters.owner}")
            conditions.append(controllers.c.user_id == account.id)
        if filters.unowned:
            conditions.append(controllers.c.user_id.is_(None))
        if filters.type is not None:
            conditions.append(controllers.c.type == filters.type.strip())
        if filters.serial_prefix is not None:
            conditions.append(registry.serial_starts_with(filters.serial_prefix))
        if filters.online is not None:
            conditions.append(controllers.c.online == filters.online)
        return await registry.list_filtered(connection, conditions, limit=limit)
