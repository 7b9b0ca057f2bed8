"""The headers every answer of the app carries, errors and files included: a strict
Content-Security-Policy (no inline script or style, no eval, no framing), no sniffing;
and no caching of anything but its files.

A plain ASGI wrapper in front of Litestar, by path, so that no answer under /app/ (a
refusal, an unknown page, a static file) can leave without them.
"""

from __future__ import annotations

from litestar.enums import ScopeType
from litestar.types import ASGIApp, Message, Receive, Scope, Send

APP_PATH = "/app"
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
PAGE_HEADERS = (
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"same-origin"),
)
NAMES = {name for name, _ in PAGE_HEADERS}
STATIC_PATH = APP_PATH + "/static/"
# a page holds the session's CSRF token and the owner's data: kept by no cache, shared or not
NO_STORE = (b"cache-control", b"no-store")


def is_app_path(path: str) -> bool:
    return path == "/" or path == APP_PATH or path.startswith(APP_PATH + "/")


class AppHeaders:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP or not is_app_path(scope["path"]):
            await self.app(scope, receive, send)
            return

        page = not scope["path"].startswith(STATIC_PATH)

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                kept = [(k, v) for k, v in message.get("headers", []) if k.lower() not in NAMES]
                if page:
                    kept = [(k, v) for k, v in kept if k.lower() != NO_STORE[0]] + [NO_STORE]
                message["headers"] = [*kept, *PAGE_HEADERS]
            await send(message)

        await self.app(scope, receive, send_with_headers)
