"""One HTTP client for the suite's one-shot requests to the servers it starts.

httpx's module-level functions (get, post) build a client per call, and with it an SSL
context loaded from certifi's bundle: 20-30 ms of CPU each, a third of the device tests'
own CPU while they polled a server. This one is built once per process; it keeps no
connection alive, so a server stopped and started again between two requests costs
nothing.
"""

from __future__ import annotations

import httpx

ONE_SHOT = httpx.Client(limits=httpx.Limits(max_keepalive_connections=0), timeout=10)
