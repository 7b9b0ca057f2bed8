"""A window over a query's rows: what a paged read asks for and what it answers.

The HTTP side checks the request (``http/paging.py``); services and repositories take a
``PageRequest`` and answer a ``Page``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Row


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


@dataclass(frozen=True, slots=True)
class Page:
    """One page of a collection, with the total that the page links are built from."""

    rows: list[Row[Any]]
    total: int
    page_count: int
