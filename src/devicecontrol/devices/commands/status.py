"""A command's statuses and the moves between them (contract §9), listed once.

queued -> sent -> succeeded | failed, and queued | sent -> expired once ``expires_at`` has
passed with no result, or -> failed when the controller changes hands. Terminal statuses
never change. The rules (``lifecycle.py``) and the queries (``repository.py``) both take
their statuses from here, so neither repeats them as literals.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final


class CommandStatus(StrEnum):
    """What a command's ``status`` column and body hold (a str: stored and sent as is)."""

    QUEUED = "queued"
    SENT = "sent"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    EXPIRED = "expired"


QUEUED, SENT = CommandStatus.QUEUED, CommandStatus.SENT
SUCCEEDED, FAILED, EXPIRED = CommandStatus.SUCCEEDED, CommandStatus.FAILED, CommandStatus.EXPIRED

# the allowed moves; anything else is refused
TRANSITIONS: Final[dict[CommandStatus, frozenset[CommandStatus]]] = {
    QUEUED: frozenset({SENT, FAILED, EXPIRED}),  # failed: the owner changed
    SENT: frozenset({SUCCEEDED, FAILED, EXPIRED}),  # a late "queued" never happens
    SUCCEEDED: frozenset(),
    FAILED: frozenset(),
    EXPIRED: frozenset(),
}
TERMINAL: Final = frozenset(status for status, moves in TRANSITIONS.items() if not moves)
UNFINISHED: Final = frozenset(status for status, moves in TRANSITIONS.items() if moves)
# what a device may report as a result
RESULTS: Final = frozenset({SUCCEEDED, FAILED})


def sources_of(target: CommandStatus) -> tuple[CommandStatus, ...]:
    """The statuses from which ``target`` may be reached, in the table's order."""
    return tuple(source for source, targets in TRANSITIONS.items() if target in targets)
