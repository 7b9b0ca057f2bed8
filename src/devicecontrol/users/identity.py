"""Usernames are e-mail addresses, matched case-insensitively."""

from __future__ import annotations

import re
import unicodedata

MAX_EMAIL_LENGTH = 254
# one @, no spaces or control characters, a dot in the domain; deliberately not RFC 5322
_EMAIL = re.compile(r"[^@\s\x00-\x1f\x7f]{1,64}@[^@\s\x00-\x1f\x7f]+\.[^@\s\x00-\x1f\x7f]+")
# control, format (zero-width joiners, bidi marks, BOM), surrogate, private-use, unassigned:
# invisible or meaningless in an address, and the makings of a look-alike of another one
_INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn"})
_ASCII_WHITESPACE = " \t\n\r\f\v"
# the one character whose lower case is ASCII (U+212A KELVIN SIGN -> "k"): it stays itself,
# so that a look-alike never folds into somebody's plain ASCII username
_FOLDS_TO_ASCII = "\u212a"


def username_key(username: str) -> str:
    """The case-insensitive identity of a username (ASCII whitespace around it is ignored)."""
    parts = username.strip(_ASCII_WHITESPACE).split(_FOLDS_TO_ASCII)
    return _FOLDS_TO_ASCII.join(part.lower() for part in parts)


def email_problem(email: str) -> str | None:
    """Why this is not an acceptable e-mail address, or None."""
    if len(email) > MAX_EMAIL_LENGTH:
        return f"must be at most {MAX_EMAIL_LENGTH} characters"
    if not _EMAIL.fullmatch(email):
        return "must be an e-mail address"
    if any(unicodedata.category(character) in _INVISIBLE_CATEGORIES for character in email):
        return "must not contain invisible or control characters"
    return None
