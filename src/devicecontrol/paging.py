"""Page requests of HAL collections: one set of rules for every paged endpoint."""

from __future__ import annotations

import math
from dataclasses import dataclass

from devicecontrol.config import Settings
from devicecontrol.errors import InvalidField


@dataclass(frozen=True, slots=True)
class PageRequest:
    """A checked ``page`` / ``page_size`` pair (1-based page, size within the maximum)."""

    page: int
    page_size: int

    @property
    def offset(self) -> int:
        return (self.page - 1) * self.page_size

    def page_count(self, total: int) -> int:
        """At least 1, so that an empty collection still has a first and a last page."""
        return max(1, math.ceil(total / self.page_size))


def page_request(settings: Settings, page: int, page_size: int | None) -> PageRequest:
    """Check the paging parameters against the contract: positive page, size 1..maximum."""
    size = settings.default_page_size if page_size is None else page_size
    if page < 1:
        raise InvalidField("page", "must be a positive integer")
    if not 1 <= size <= settings.max_page_size:
        raise InvalidField("page_size", f"must be between 1 and {settings.max_page_size}")
    return PageRequest(page=page, page_size=size)


def size_query(settings: Settings, paging: PageRequest) -> dict[str, str | int]:
    """The ``page_size`` that page links carry: only a non-default one."""
    if paging.page_size == settings.default_page_size:
        return {}
    return {"page_size": paging.page_size}
