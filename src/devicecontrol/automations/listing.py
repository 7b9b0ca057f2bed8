"""The filters of the operators' ``geofences list`` and ``schedules list``: checked before
any query, so that a typo is an error rather than an empty table."""

from __future__ import annotations

from devicecontrol.controllers import registry_repository
from devicecontrol.controllers.identity import is_serial_number
from devicecontrol.database.engine import Reader
from devicecontrol.errors import InvalidField
from devicecontrol.users.identity import email_problem, username_key


def check_filters(owner: str | None, serial_number: str | None) -> None:
    if owner is not None and (problem := email_problem(owner)) is not None:
        raise InvalidField("owner", problem)
    if serial_number is not None and not is_serial_number(serial_number):
        raise InvalidField("serial", "must be 1-64 characters of A-Z a-z 0-9 _ -")


async def owner_id(connection: Reader, owner: str | None) -> int | None:
    """The account named ``owner`` (None: no owner filter); an unknown one is an error."""
    if owner is None:
        return None
    key = username_key(owner)
    account = (await registry_repository.accounts_by_key(connection, [key])).get(key)
    if account is None:
        raise InvalidField("owner", f"no account is named {owner}")
    return int(account.id)
