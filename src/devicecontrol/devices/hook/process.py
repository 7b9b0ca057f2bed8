"""The broker hook's own process under ``serve`` (``DEVICECONTROL_BROKER_HOOK_LISTEN``): its
listener, never the public HTTP port. It prints ``ready`` once it listens, or the one-line
reason it cannot, as the device link's process does (``link/supervisor.py`` starts both).
"""

from __future__ import annotations

import asyncio
import os
import socket
import ssl
import sys

import uvicorn

from devicecontrol.config import Settings
from devicecontrol.devices.hook.app import create_hook_app
from devicecontrol.devices.link.helper_process import run_helper, say
from devicecontrol.devices.link.supervisor import READY
from devicecontrol.observability import metrics
from devicecontrol.runtime import Runtime


def _listening(address: str) -> socket.socket:
    """The listener, bound here so that a taken port is one line. Made with the TCP
    protocol named: asyncio sets TCP_NODELAY only on such sockets' connections, and without
    it a keep-alive answer's second segment waited 40 ms for the broker's delayed ACK."""
    host, _, port = address.rpartition(":")
    host = host.strip("[]")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((host, int(port)))
        listener.listen(socket.SOMAXCONN)
    except OSError:
        listener.close()
        raise
    return listener


async def _run(settings: Settings) -> int:
    assert settings.broker_hook_listen is not None and settings.broker_hook_token is not None
    try:
        listener = _listening(settings.broker_hook_listen)
    except OSError as exc:
        reason = os.strerror(exc.errno) if exc.errno else str(exc)
        say(
            f"cannot listen for the broker on {settings.broker_hook_listen} "
            f"(DEVICECONTROL_BROKER_HOOK_LISTEN): {reason}"
        )
        return 1
    runtime = Runtime.from_settings(settings)
    app = create_hook_app(runtime, settings.broker_hook_token)
    config = uvicorn.Config(
        app,
        lifespan="off",
        access_log=False,  # a path may carry the token
        log_config=None,
        server_header=False,
        proxy_headers=False,
        ssl_certfile=settings.broker_hook_tls_cert,
        ssl_keyfile=settings.broker_hook_tls_key,
    )
    try:
        config.load()  # the certificate and key read now: unusable ones are one line
    except (OSError, ssl.SSLError) as exc:
        listener.close()
        await runtime.close()
        say(
            "the broker hook's certificate or key (DEVICECONTROL_BROKER_HOOK_TLS_CERT, _KEY) "
            f"cannot be used: {' '.join(str(exc).split())}"
        )
        return 1
    server = uvicorn.Server(config)
    loop = asyncio.get_running_loop()

    def parent_gone() -> None:
        if not os.read(sys.stdin.fileno(), 4096):  # end of file: serve is gone
            loop.remove_reader(sys.stdin.fileno())
            server.should_exit = True

    loop.add_reader(sys.stdin.fileno(), parent_gone)
    say(READY)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    try:
        await server.serve(sockets=[listener])  # SIGTERM and SIGINT stop it
    finally:
        await runtime.close()
        metrics.mark_this_process_dead()
    return 0


def main() -> int:
    return run_helper(_run)


if __name__ == "__main__":
    sys.exit(main())
