"""Something the link keeps doing that fails (the database down, the broker out of reach):
logged once when the outage begins and once when it ends, not at every attempt.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

__all__ = ["Outage"]

logger = logging.getLogger("devicecontrol.devices.link")


class Outage:
    """One kind of failure. ``began`` is the warning's format; ``ended``, if any, the line
    written when it works again."""

    def __init__(self, began: str, *, ended: str | None = None) -> None:
        self.began = began
        self.ended = ended
        self.failing = False

    def failed(self, *args: object, exc_info: bool = True) -> bool:
        """It failed (``args`` fill ``began``); True when that began an outage (logged)."""
        began = not self.failing
        if began:
            logger.warning(self.began, *args, exc_info=exc_info)
        self.failing = True
        return began

    def recovered(self) -> bool:
        """It worked; True when that ended an outage."""
        ended = self.failing
        if ended and self.ended is not None:
            logger.warning(self.ended)
        self.failing = False
        return ended

    async def attempt(self, work: Callable[[], Awaitable[None]]) -> bool:
        """Run ``work``; a failure is logged as above and not raised. True when it worked."""
        try:
            await work()
        except Exception:
            self.failed()
            return False
        self.recovered()
        return True
