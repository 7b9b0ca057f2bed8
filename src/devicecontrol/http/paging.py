"""Page requests of HAL collections: the two query parameters and one set of rules for
every paged endpoint."""

from __future__ import annotations

from typing import Annotated

from litestar.params import QueryParameter

from devicecontrol.config import Settings
from devicecontrol.database.pages import PageRequest
from devicecontrol.errors import InvalidField
from devicecontrol.http.parameters import whole_number

# the largest page: what a signed 64-bit integer holds, in any client and any database
MAX_PAGE = 2**63 - 1

# the text as sent: page_request parses it strictly (Litestar's int would take "2.0",
# and would read "null" as absent); documented as the integers it accepts
PageNumber = Annotated[
    str | None,
    QueryParameter(
        schema_extra={
            "one_of": None,
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_PAGE,
            "default": 1,
        }
    ),
]
# documented with this app's bounds, which are settings, by openapi.served_document
PageSize = Annotated[str | None, QueryParameter()]


def page_request(
    settings: Settings, page: int | str | None, page_size: int | str | None
) -> PageRequest:
    """Check the paging parameters against the contract: positive page, size 1..maximum.

    Both may be the query text as sent (None when absent): only ASCII digits are a number,
    so ``page=2.0`` or ``page_size=null`` is a 400 like any other non-number, not a default.
    """
    page_problem = f"must be an integer between 1 and {MAX_PAGE}"
    size_problem = f"must be an integer between 1 and {settings.max_page_size}"
    number = whole_number(page, "page", page_problem, MAX_PAGE)
    size = whole_number(page_size, "page_size", size_problem, settings.max_page_size)
    number = 1 if number is None else number
    size = settings.default_page_size if size is None else size
    if not 1 <= number <= MAX_PAGE:
        raise InvalidField("page", page_problem)
    if not 1 <= size <= settings.max_page_size:
        raise InvalidField("page_size", size_problem)
    return PageRequest(page=number, page_size=size)


def size_query(settings: Settings, paging: PageRequest) -> dict[str, str | int]:
    """The ``page_size`` that page links carry: only a non-default one."""
    if paging.page_size == settings.default_page_size:
        return {}
    return {"page_size": paging.page_size}
