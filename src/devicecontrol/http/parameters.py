"""Query parameters read as the text sent: a whole number is ASCII digits and nothing else.

Litestar's ``int`` would take ``"2.0"`` and read ``"null"`` as absent, and ``int()`` takes
``"+1"``, ``" 1"`` and other scripts' digits; here all of those are a 400 naming the field.
"""

from __future__ import annotations

import re

from devicecontrol.errors import InvalidField

_DIGITS = re.compile(r"[0-9]+")


def whole_number(text: int | str | None, field: str, problem: str, maximum: int) -> int | None:
    """The query text as an int (None when absent); anything but digits is a 400 saying
    ``problem``. Past ``maximum`` it is ``maximum + 1``: the caller checks the range."""
    if text is None or isinstance(text, int):
        return text
    if not _DIGITS.fullmatch(text):
        raise InvalidField(field, problem)
    digits = text.lstrip("0")
    # more digits than the maximum has is out of range without converting them
    return maximum + 1 if len(digits) > len(str(maximum)) else int(digits or "0")
