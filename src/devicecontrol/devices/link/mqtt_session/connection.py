"""What every connection of the service to an MQTT broker shares (the link's session, a
probe, the operators' commands that keep device accounts): the broker's TLS, how a
refused subscription reads, and a failure told in one line.
"""

from __future__ import annotations

import ssl

from devicecontrol.config import MqttUrl

__all__ = ["one_line", "subscription_refused", "tls_context"]


def tls_context(url: MqttUrl, ca_file: str | None) -> ssl.SSLContext | None:
    """mqtts: the broker's certificate checked against ``ca_file``, else the system's CAs."""
    return ssl.create_default_context(cafile=ca_file) if url.tls else None


def subscription_refused(granted: object) -> bool:
    """A SUBACK's code for one topic is a failure (0x80 and up); paho gives an int (MQTT
    3.1.1) or a ``ReasonCode`` (5)."""
    value = getattr(granted, "value", granted)
    return not isinstance(value, int) or value >= 0x80


def one_line(exc: BaseException) -> str:
    """Why a connection failed, on one line for the operator (the type when it says nothing)."""
    text = " ".join(str(exc).split())
    return text or type(exc).__name__
