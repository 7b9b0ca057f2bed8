"""Device identity: the secret a device logs in with, checked and throttled (contract §9).

A device connects with client id = username = its serial number and password = its device
secret. Only a SHA-256 digest of the secret is stored, compared in constant time. Failed
connects count per serial and address, and per address, like failed logins; while a
subject is throttled even the right secret is refused, the same way. Never per serial
alone: whoever knows a serial number could then keep its device out from anywhere.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from devicecontrol.auth import tokens
from devicecontrol.clock import utcnow
from devicecontrol.controllers.identity import is_serial_number
from devicecontrol.devices import repository
from devicecontrol.errors import NotFound
from devicecontrol.observability import audit
from devicecontrol.observability.metrics import THROTTLED
from devicecontrol.runtime import Runtime
from devicecontrol.throttling import rules as throttling

DEVICE_SERIAL = "device_serial"
DEVICE_ADDRESS = "device_address"
# a connect's one read: the device and its two throttles (per serial and address, and per
# address), or the device alone when the broker does not say where it connects from
_CONNECT_THROTTLED = repository.device_throttled_statement(throttling.over_limit(2))
_CONNECT = repository.device_throttled_statement(throttling.over_limit(0))


def new_device_secret() -> str:
    """256 random bits, URL-safe (43 characters): printed once, stored as a digest."""
    return secrets.token_urlsafe(32)


def device_secret_digest(secret: str) -> str:
    return tokens.digest(secret)


@dataclass(frozen=True, slots=True)
class DeviceIdentity:
    """A device the link let in, and the digest it proved (a rotation changes it)."""

    controller_id: int
    serial_number: str
    type: str
    secret_digest: str

    @classmethod
    def of(cls, device: Any) -> DeviceIdentity:
        """From a ``repository.find_device`` or ``online_devices`` row."""
        return cls(device.id, device.serial_number, device.type, device.device_secret_digest or "")


async def authenticate_device(
    runtime: Runtime,
    *,
    client_id: str | None,
    username: str | None,
    password: str | None,
    address: str | None,
) -> DeviceIdentity | None:
    """The device, if its CONNECT proves it; None refuses it ("not authorized").

    The throttle is checked first. A refusal is audited, naming the serial only when it
    matched a controller, and never the password. ``address`` None: the broker that asks
    does not say where the device is (RabbitMQ's HTTP backend); no throttle then, since a
    count per serial alone would let whoever knows a serial number keep its device out.
    """
    serial = username or ""
    settings = runtime.settings
    # the serial from this address: failures elsewhere never keep the device out
    by_serial = (DEVICE_SERIAL, f"{serial}@{address}")
    by_address = (DEVICE_ADDRESS, address or "")
    checks = [(by_serial, settings.throttle_device_per_serial),
              (by_address, settings.throttle_device_per_address)]  # fmt: skip
    # the right secret writes nothing: the throttle and the secret are read, in one
    # statement (a broker's hook answers thousands of these a second)
    throttles = checks if address is not None else []
    now = utcnow()
    async with runtime.database.read() as connection:
        found = await repository.find_device_throttled(
            connection,
            _CONNECT_THROTTLED if throttles else _CONNECT,
            serial if is_serial_number(serial) else "",
            throttling.over_limit_parameters(throttles, now),
        )
        if found is None:  # no such device: the throttle alone, for the audit's reason
            device = None
            throttled = await throttling.seconds_until_allowed(connection, throttles, now) > 0
        else:
            device, throttled = found
    stored = device.device_secret_digest if device is not None else None
    proved = tokens.matches_digest(password or "", stored)
    if throttled:
        THROTTLED.labels("device connects").inc()
        reason = "throttled"
    elif proved and device is not None and client_id == serial:
        return DeviceIdentity.of(device)
    else:
        if address is not None:
            async with runtime.database.write() as connection:
                await throttling.record_failures(connection, [by_serial, by_address], utcnow())
        reason = "wrong credentials"
    audit.record(
        "device_connect",
        audit.FAILURE,
        serial_number=device.serial_number if device is not None else None,
        client_address=address,
        reason=reason,
    )
    return None


async def rotate_device_secret(
    runtime: Runtime,
    serial_number: str,
    *,
    before_commit: Callable[[str], Awaitable[None]] | None = None,
) -> str:
    """A new secret for the device; the old one stops working at once (the link closes a
    connection made with it within 2 s).

    ``before_commit`` gets the new secret as the transaction's last step (an external
    broker takes it there): what it raises leaves the old secret in place. Audited on
    success only, like the other operators' commands: a failed command already says why in
    its one line on stderr.
    """
    secret = new_device_secret()
    async with runtime.database.write() as connection:
        if not is_serial_number(serial_number) or not await repository.set_device_secret(
            connection, serial_number, device_secret_digest(secret), utcnow()
        ):
            raise NotFound(f"no controller has the serial number {serial_number}")
        if before_commit is not None:
            await before_commit(secret)
    audit.record("device_secret_rotation", audit.SUCCESS, serial_number=serial_number)
    return secret
