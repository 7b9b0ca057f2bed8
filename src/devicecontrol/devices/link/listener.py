"""What every adapter that serves devices directly shares (contract §9): its listening
socket, bound before anything else so that a taken port is a clean one-line error, the
devices' TLS, and the keep-alive a device is granted.
"""

from __future__ import annotations

import socket
import ssl

from devicecontrol.devices.link.ports import LinkError

# connections the kernel completes before the link accepts them: a reconnect storm of a
# whole fleet arrives at once, and a SYN past a full backlog waits 1 s, then 3, to be sent
# again. Linux caps it at net.core.somaxconn (4096 since kernel 5.4)
LISTEN_BACKLOG = 4096


def listening_socket(listen: str) -> socket.socket:
    """The broker's socket, bound now: a taken port or a bad address is a ``LinkError``."""
    host, _, port = listen.rpartition(":")
    host = host.strip("[]")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        return socket.create_server((host, int(port)), family=family, backlog=LISTEN_BACKLOG)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise LinkError(
            f"cannot listen for devices on {listen} (DEVICECONTROL_MQTT_LISTEN): {reason}"
        ) from None


def tls_context(cert_file: str, key_file: str) -> ssl.SSLContext:
    """The TLS of the device listener; unusable files are a ``LinkError``."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(cert_file, key_file)
    except (OSError, ssl.SSLError) as exc:
        reason = getattr(exc, "strerror", None) or getattr(exc, "reason", None) or str(exc)
        raise LinkError(
            f"cannot use DEVICECONTROL_MQTT_TLS_CERT and DEVICECONTROL_MQTT_TLS_KEY: {reason}"
        ) from None
    return context


def granted_keep_alive(asked_s: int, maximum_s: int) -> int:
    """The keep-alive a device gets (contract §9 Limits): what it asked for, unless that is
    none (0) or more than the maximum, which it then gets instead."""
    return asked_s if 0 < asked_s <= maximum_s else maximum_s
