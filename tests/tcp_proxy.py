"""A TCP proxy on loopback, to break the path between an MQTT client and its broker the two
ways networks do: ``cut`` closes both sides of every connection (the peer's FIN), ``stall``
keeps every socket open and forwards nothing more (a pulled cable, a NAT that forgot the
connection: no FIN, no RST). Connections made after either are forwarded as usual."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

CHUNK = 65536


@dataclass(eq=False)
class _Path:
    """One client's connection and the proxy's own connection to the server."""

    client: asyncio.StreamWriter
    server: asyncio.StreamWriter
    stalled: bool = False
    pumps: list[asyncio.Task[None]] = field(default_factory=list)

    def close(self) -> None:
        for writer in (self.client, self.server):
            writer.close()


class TcpProxy:
    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.port = 0
        self.accepted = 0  # connections forwarded to the server, since the start
        self._paths: set[_Path] = set()
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for path in list(self._paths):
            path.close()
            for pump in path.pumps:
                pump.cancel()
        self._paths.clear()

    def cut(self) -> None:
        """Close every connection open now, on both sides."""
        for path in list(self._paths):
            path.close()

    def stall(self) -> None:
        """Forward nothing more on the connections open now, and close none of them."""
        for path in self._paths:
            path.stalled = True

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            server_reader, server_writer = await asyncio.open_connection(
                "127.0.0.1", self.upstream_port
            )
        except OSError:  # the server is down: the client sees its connection refused, as a FIN
            writer.close()
            return
        self.accepted += 1
        path = _Path(writer, server_writer)
        self._paths.add(path)
        path.pumps = [
            asyncio.create_task(self._pump(path, reader, server_writer)),
            asyncio.create_task(self._pump(path, server_reader, writer)),
        ]

    async def _pump(
        self, path: _Path, source: asyncio.StreamReader, sink: asyncio.StreamWriter
    ) -> None:
        try:
            while data := await source.read(CHUNK):
                if path.stalled:
                    continue  # read and dropped: the other side hears nothing, and no FIN
                sink.write(data)
                await sink.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            if not path.stalled:
                path.close()
                self._paths.discard(path)


@asynccontextmanager
async def tcp_proxy(upstream_port: int) -> AsyncIterator[TcpProxy]:
    proxy = TcpProxy(upstream_port)
    await proxy.start()
    try:
        yield proxy
    finally:
        with contextlib.suppress(Exception):
            await proxy.stop()
