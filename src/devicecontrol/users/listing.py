"""``users list``: accounts as the operators see them, narrowed by filters."""

from __future__ import annotations

import unicodedata

from sqlalchemy import Row

from devicecontrol.errors import InvalidField
from devicecontrol.runtime import Runtime
from devicecontrol.users import repository
from devicecontrol.users.identity import MAX_EMAIL_LENGTH, username_key


def _search_key(email_contains: str) -> str:
    """Compared with the lower-cased username key, so that the match ignores case on both
    engines alike (SQLite's LIKE would ignore ASCII case, PostgreSQL's would not)."""
    key = username_key(email_contains)
    if not key:
        raise InvalidField("email_contains", "must not be empty")
    if len(key) > MAX_EMAIL_LENGTH:
        raise InvalidField("email_contains", f"must be at most {MAX_EMAIL_LENGTH} characters")
    if any(unicodedata.category(character) == "Cc" for character in key):
        raise InvalidField("email_contains", "must not contain control characters")
    return key


async def list_users(
    runtime: Runtime, *, disabled: bool | None, email_contains: str | None, limit: int
) -> tuple[list[Row], int]:
    """The first ``limit`` matching accounts in creation order, and the total."""
    key = None if email_contains is None else _search_key(email_contains)
    async with runtime.database.read() as connection:
        return await repository.list_accounts(
            connection, disabled=disabled, key_contains=key, limit=limit
        )
