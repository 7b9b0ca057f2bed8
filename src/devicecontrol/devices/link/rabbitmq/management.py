"""RabbitMQ's management API, for the one thing AMQP cannot do: end another client's
connection (a device's, made with a secret since rotated). The link logs in as its own
broker account, which the broker hook tags ``administrator`` when this API is configured
(closing another user's connection needs that tag).

One request per rotated secret's connection: the standard library's client, in a thread.
"""

from __future__ import annotations

import asyncio
import base64
import ssl
import urllib.error
import urllib.request
from urllib.parse import quote

from devicecontrol.config import MqttUrl

__all__ = ["ManagementApi", "ManagementError"]

TIMEOUT_S = 5
CLOSE_REASON = "device secret rotated"


class ManagementError(Exception):
    """The management API refused or could not be reached (one line)."""


class ManagementApi:
    """Closes connections by name (``DEVICECONTROL_RABBITMQ_MANAGEMENT_URL``)."""

    def __init__(self, base_url: str, account: MqttUrl, *, ca_file: str | None) -> None:
        self.base_url = base_url
        credentials = f"{account.username}:{account.password}".encode()
        self._authorization = "Basic " + base64.b64encode(credentials).decode("ascii")
        secure = base_url.lower().startswith("https:")
        self._context = ssl.create_default_context(cafile=ca_file) if secure else None

    async def close_connection(self, name: str) -> bool:
        """End the connection called ``name`` (as the event exchange names it); False when
        there is none by that name (it ended meanwhile)."""
        return await asyncio.to_thread(self._close, name)

    def _close(self, name: str) -> bool:
        # an http(s) URL: the settings accept no other scheme
        request = urllib.request.Request(  # noqa: S310
            f"{self.base_url}/api/connections/{quote(name, safe='')}",
            method="DELETE",
            headers={"Authorization": self._authorization, "X-Reason": CLOSE_REASON},
        )
        try:
            with urllib.request.urlopen(  # noqa: S310
                request, timeout=TIMEOUT_S, context=self._context
            ):
                return True
        except urllib.error.HTTPError as refused:
            if refused.code == 404:
                return False
            raise ManagementError(
                f"RabbitMQ's management API at {self.base_url} answered {refused.code} "
                f"to closing a connection (the link's account needs the administrator tag)"
            ) from None
        except (urllib.error.URLError, OSError) as failed:
            reason = getattr(failed, "reason", failed)
            raise ManagementError(
                f"RabbitMQ's management API at {self.base_url} cannot be reached: {reason}"
            ) from None
