"""The web app spoken to as a browser speaks to it, in-process: its forms posted the way
htmx posts them, the session's CSRF token read from the page as htmx reads it."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from http.cookies import SimpleCookie

import httpx

from devicecontrol.auth.sessions import COOKIE_NAME, TLS_COOKIE_NAME
from tests.factories import PASSWORD

HTMX = {"HX-Request": "true"}
_HX_HEADERS = re.compile(r"hx-headers='([^']*)'")


async def log_in(http: httpx.AsyncClient, username: str, password: str = PASSWORD) -> str:
    """Log in through the form; the session's CSRF token, as the page hands it to htmx.
    The session cookie stays in ``http``'s jar."""
    answer = await http.post(
        "/app/login", data={"username": username, "password": password}, headers=HTMX
    )
    assert answer.status_code == 200, answer.text
    assert answer.headers["hx-redirect"] == "/app/", answer.headers
    return csrf_token_of((await http.get("/app/")).text)


def csrf_token_of(page: str) -> str:
    found = _HX_HEADERS.search(page)
    assert found, page
    return str(json.loads(found.group(1))["X-CSRF-Token"])


def session_cookie_attributes(answer: httpx.Response) -> dict[str, str | bool]:
    """The Set-Cookie of the session (under either name), its attributes by lower-cased
    name, and its ``name``."""
    names = (COOKIE_NAME, TLS_COOKIE_NAME)
    headers = [h for h in answer.headers.get_list("set-cookie") if h.startswith(names)]
    assert len(headers) == 1, answer.headers
    parsed = SimpleCookie()
    parsed.load(headers[0])
    [morsel] = parsed.values()
    attributes: dict[str, str | bool] = {"name": morsel.key, "value": morsel.value}
    for part in headers[0].split(";")[1:]:
        name, _, value = part.strip().partition("=")
        attributes[name.lower()] = value or True
    return attributes


def changed_with(token: str) -> dict[str, str]:
    """The headers htmx sends with a change: its own, and the session's token."""
    return {**HTMX, "X-CSRF-Token": token}


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []

    def handle_data(self, data: str) -> None:
        self.parts.append(data)


def text_of(html: str) -> str:
    """What a page or fragment reads as: its text without the tags (a reading's fields are
    each in a ``<bdi>`` of their own), whitespace as written."""
    parser = _Text()
    parser.feed(html)
    return "".join(parser.parts)
