"""``controllers list``: the registry as the operators see it, narrowed by filters.

Filters are checked before any query, so a typo is an error rather than an empty table.
An owner named by e-mail must have an account (a disabled one counts: its controllers are
still registered to it).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Row

from devicecontrol.controllers import registry_repository
from devicecontrol.controllers.identity import is_serial_number
from devicecontrol.errors import BadRequest, InvalidField
from devicecontrol.runtime import Runtime
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
    async with runtime.database.read() as connection:
        owner_id = None
        if filters.owner is not None:
            key = username_key(filters.owner)
            account = (await registry_repository.accounts_by_key(connection, [key])).get(key)
            if account is None:
                raise InvalidField("owner", f"no account is named {filters.owner}")
            owner_id = account.id
        return await registry_repository.list_filtered(
            connection,
            owner_id=owner_id,
            unowned=filters.unowned,
            type_=None if filters.type is None else filters.type.strip(),
            serial_prefix=filters.serial_prefix,
            online=filters.online,
            limit=limit,
        )
