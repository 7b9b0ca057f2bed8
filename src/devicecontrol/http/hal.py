"""HAL envelopes: the only place that builds ``_links``. Links are path-only and carry /v1."""

from __future__ import annotations

from typing import Any, TypeVar
from urllib.parse import urlencode

import msgspec
from litestar import Response

from devicecontrol.config import Settings
from devicecontrol.database.pages import Page, PageRequest
from devicecontrol.http.paging import size_query

API_PREFIX = "/v1"
HAL_JSON = "application/hal+json"
T = TypeVar("T")


class Link(msgspec.Struct, omit_defaults=True, frozen=True):
    href: str
    templated: bool = False


class SelfLinks(msgspec.Struct, frozen=True):
    self: Link


class PageLinks(msgspec.Struct, omit_defaults=True, frozen=True):
    self: Link
    first: Link
    last: Link
    prev: Link | None = None
    next: Link | None = None


class HalPage(msgspec.Struct, frozen=True):
    """One page of a HAL collection: its items under ``_embedded``, then what every page
    carries (``page_members``). Each collection subclasses it and only narrows ``embedded``
    to the Struct that names its items' relation (``controller``, ...): the field keeps its
    place, and the document names each page and its items (Litestar does not resolve a
    generic's parameter in a subclass)."""

    embedded: msgspec.Struct = msgspec.field(name="_embedded")
    total: int
    page: int
    page_size: int
    page_count: int
    links: PageLinks = msgspec.field(name="_links")


def api_path(path: str) -> str:
    return f"{API_PREFIX}{path}"


def self_links(path: str) -> SelfLinks:
    return SelfLinks(self=Link(api_path(path)))


def created(content: T, path: str | None) -> Response[T]:
    """201 with ``Location``: the path of what was made, with /v1 (None: nothing was made,
    and no Location)."""
    headers = {} if path is None else {"Location": api_path(path)}
    return Response(content, status_code=201, headers=headers)


def controller_path(serial_number: str) -> str:
    return f"/controllers/{serial_number}"


def page_links(path: str, *, page: int, page_count: int, query: dict[str, str | int]) -> PageLinks:
    """Links of one page of a collection; every link keeps the request's filters."""
    rest = urlencode(query)  # what every link carries after its page number
    prefix = api_path(path) + "?page="
    suffix = "&" + rest if rest else ""

    def at(number: int) -> Link:
        return Link(f"{prefix}{number}{suffix}")

    return PageLinks(
        self=at(page),
        first=at(1),
        last=at(page_count),
        prev=at(page - 1) if 1 < page <= page_count else None,
        next=at(page + 1) if page < page_count else None,
    )


def page_members(
    settings: Settings,
    paging: PageRequest,
    result: Page,
    path: str,
    filters: dict[str, str | None] | None = None,
) -> dict[str, Any]:
    """What every paged collection carries beside its items: counts and links.

    Links keep a non-default ``page_size`` and the filters that were given, in that order.
    """
    query: dict[str, str | int] = size_query(settings, paging)
    query.update({name: value for name, value in (filters or {}).items() if value is not None})
    return {
        "total": result.total,
        "page": paging.page,
        "page_size": paging.page_size,
        "page_count": result.page_count,
        "links": page_links(path, page=paging.page, page_count=result.page_count, query=query),
    }
