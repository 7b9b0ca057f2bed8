"""A streamed download from a handler that otherwise answers HAL: its own media type.

Litestar gives a returned ``Response`` the handler's declared media type; a handler that
answers ``application/hal+json`` by default and a file on request (the readings as CSV)
needs the file's own type to win.
"""

from __future__ import annotations

from typing import Any

from litestar.response import Stream
from litestar.response.base import ASGIResponse


class Download(Stream):
    """A ``Stream`` that keeps the media type it was made with."""

    def to_asgi_response(self, *args: Any, **kwargs: Any) -> ASGIResponse:
        kwargs["media_type"] = self.media_type
        return super().to_asgi_response(*args, **kwargs)
