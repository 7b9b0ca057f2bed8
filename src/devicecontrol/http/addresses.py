"""The client's address (the socket's peer, or X-Forwarded-For behind a trusted proxy) and
whether it came over TLS (directly, or X-Forwarded-Proto behind one)."""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from typing import Any

from litestar.connection import ASGIConnection
from litestar.types import Scope

from devicecontrol.config import IPNetwork

UNKNOWN = "unknown"


def _parse(address: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(address.strip())
    except ValueError:
        return None


def _is_trusted(address: str, trusted: Sequence[IPNetwork]) -> bool:
    parsed = _parse(address)
    return parsed is not None and any(parsed in network for network in trusted)


def client_address(
    connection: ASGIConnection[Any, Any, Any, Any], trusted: Sequence[IPNetwork]
) -> str:
    """Walk X-Forwarded-For from the right only while the hop that added it is trusted."""
    peer = connection.client.host if connection.client else UNKNOWN
    if not trusted or not _is_trusted(peer, trusted):
        return peer
    return _forwarded_for(peer, connection.headers.getall("x-forwarded-for", []), trusted)


def scope_client_address(scope: Scope, trusted: Sequence[IPNetwork]) -> str:
    """``client_address`` from a raw ASGI scope, for the request log (no connection object)."""
    client = scope.get("client")
    peer = client[0] if client else UNKNOWN
    if not trusted or not _is_trusted(peer, trusted):
        return peer
    headers = [v.decode("latin-1") for k, v in scope["headers"] if k == b"x-forwarded-for"]
    return _forwarded_for(peer, headers, trusted)


def _forwarded_for(peer: str, headers: Sequence[str], trusted: Sequence[IPNetwork]) -> str:
    forwarded = ",".join(headers)
    hops = [hop.strip() for hop in forwarded.split(",") if hop.strip()]
    address = peer
    for hop in reversed(hops):
        if _parse(hop) is None:
            break  # garbage: stop at the last address a trusted proxy vouched for
        address = hop
        if not _is_trusted(hop, trusted):
            break
    return address


def came_over_tls(
    connection: ASGIConnection[Any, Any, Any, Any], trusted: Sequence[IPNetwork]
) -> bool:
    """Whether the client spoke HTTPS: to us directly, or to a trusted proxy that says so in
    ``X-Forwarded-Proto`` (deploy/'s nginx sets it); an untrusted peer's header is ignored."""
    if connection.scope.get("scheme") == "https":
        return True
    peer = connection.client.host if connection.client else UNKNOWN
    if not trusted or not _is_trusted(peer, trusted):
        return False
    forwarded = connection.headers.getall("x-forwarded-proto", [])
    return len(forwarded) == 1 and forwarded[0].strip().lower() == "https"
