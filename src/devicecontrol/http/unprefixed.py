"""The original API's unprefixed paths (``/controllers``, ``/auth/login``...), answered as
their ``/v1`` twins: rewritten before routing, so that Litestar registers each handler once.

Registered twice (under ``/v1`` and ``/``) every handler was deep-copied twice: most of the
cost of building the app, which every in-process test pays. The request log and the metrics
still name the unprefixed route (``path_template`` without ``/v1``), as before.
"""

from __future__ import annotations

from collections.abc import Iterable

from litestar.enums import ScopeType
from litestar.types import ASGIApp, Receive, Scope, Send

PREFIX = "/v1"


class UnprefixedPaths:
    def __init__(self, app: ASGIApp, segments: Iterable[str]) -> None:
        self.app = app
        self.segments = frozenset(segments)  # the API's first path segments

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path: str = scope.get("path", "")
        if (
            scope["type"] != ScopeType.HTTP
            or path.partition("/")[2].partition("/")[0] not in self.segments
        ):
            await self.app(scope, receive, send)
            return
        raw_path = scope.get("raw_path")
        scope["path"] = PREFIX + path
        if raw_path is not None:
            scope["raw_path"] = PREFIX.encode() + raw_path
        try:
            await self.app(scope, receive, send)
        finally:
            scope["path"] = path
            if raw_path is not None:
                scope["raw_path"] = raw_path
            template = scope.get("path_template")
            if isinstance(template, str) and template.startswith(PREFIX + "/"):
                scope["path_template"] = template[len(PREFIX) :]
