"""Usernames are e-mail addresses, matched case-insensitively."""

from __future__ import annotations

import re

MAX_EMAIL_LENGTH = 254
# one @, no spaces or control characters, a dot in the domain; deliberately not RFC 5322
_EMAIL = re.compile(r"^[^@\s\x00-\x1f\x7f]{1,64}@[^@\s\x00-\x1f\x7f]+\.[^@\s\x00-\x1f\x7f]+$")


def username_key(username: str) -> str:
    """The case-insensitive identity of a username."""
    return username.strip().lower()


def email_problem(email: str) -> str | None:
    """Why this is not an acceptable e-mail address, or None."""
    if len(email) > MAX_EMAIL_LENGTH:
        return f"must be at most {MAX_EMAIL_LENGTH} characters"
    if not _EMAIL.match(email):
        return "must be an e-mail address"
    return None
