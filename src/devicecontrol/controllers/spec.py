"""One controller's registration as the operator writes it: checked text to typed values.

``controllers add`` and every CSV row of ``controllers import`` go through ``parse_spec``, so
both accept and refuse exactly the same values. The claim code and the device secret leave
here only as digests (``row_values``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from devicecontrol.controllers.identity import (
    claim_code_digest,
    is_serial_number,
    normalize_device_mac,
)
from devicecontrol.devices.identity import device_secret_digest
from devicecontrol.errors import InvalidField

_MAX_LENGTHS = {"type": 64, "name": 200, "firmware_version": 64, "device_group": 64}
_TRUE = frozenset({"1", "true", "yes", "y", "on", "online"})
_FALSE = frozenset({"0", "false", "no", "n", "off", "offline", ""})
_ONLINE_WORDS = _TRUE | _FALSE
_MAX_INTEGER = 2**31


@dataclass(frozen=True, slots=True)
class ControllerSpec:
    serial_number: str
    mac: str
    type: str
    name: str = ""
    firmware_version: str = ""
    brand_id: int = 1
    device_group: str = ""
    room_id: int | None = None
    claim_code: str | None = None  # None: not stated (an empty CSV cell)
    owner: str | None = None  # None: not stated
    # the initial value only: the device link owns it once ``serve`` runs (contract §9)
    online: bool = False
    # None: not stated (an empty CSV cell); the device cannot connect until it has one.
    # Kept out of repr so that no log or traceback of a spec shows it.
    device_secret: str | None = field(default=None, repr=False)

    def row_values(self, owner_id: int | None, now: datetime) -> dict[str, Any]:
        """The ``controllers`` row: claim code and device secret only as digests, the owner
        as an id."""
        code, secret = self.claim_code, self.device_secret
        return {
            "serial_number": self.serial_number,
            "mac": self.mac,
            "type": self.type,
            "name": self.name,
            "firmware_version": self.firmware_version,
            "brand_id": self.brand_id,
            "device_group": self.device_group,
            "room_id": self.room_id,
            "online": self.online,
            "claim_code_digest": claim_code_digest(self.serial_number, code) if code else None,
            "device_secret_digest": device_secret_digest(secret) if secret else None,
            "user_id": owner_id,
            "created_at": now,
        }


def _integer(raw: str, column: str) -> int | None:
    if raw == "":
        return None
    try:
        value = int(raw)
    except ValueError:
        raise InvalidField(column, "must be an integer") from None
    if not 0 <= value < _MAX_INTEGER:
        raise InvalidField(column, "must be between 0 and 2147483647")
    return value


def _device_secret(raw: str) -> str | None:
    """A stated secret is taken exactly as the device will send it: white space around it
    is refused rather than trimmed, or the device could never log in with what it holds."""
    if not raw.strip():
        return None
    if raw != raw.strip():
        raise InvalidField("device_secret", "must not start or end with white space")
    return raw


def parse_spec(values: dict[str, str | None]) -> ControllerSpec:
    """Check one controller's fields as text (a CSV row or the CLI's options).

    An empty ``device_secret`` is "not stated", as in a CSV cell; ``controllers add``
    refuses an empty ``--device-secret`` itself.
    """
    clean = {k: (v or "").strip() for k, v in values.items()}
    for column, value in clean.items():
        if "\x00" in value:  # PostgreSQL cannot store NUL in text; SQLite would keep it
            raise InvalidField(column, "must not contain NUL characters")
    serial = clean.get("serial_number", "")
    if not is_serial_number(serial):
        raise InvalidField("serial_number", "must be 1-64 characters of A-Z a-z 0-9 _ -")
    mac = normalize_device_mac(clean.get("mac", ""))
    if mac is None:
        raise InvalidField("mac", "must be 12 or 16 hex digits, optionally separated by : - .")
    if not clean.get("type"):
        raise InvalidField("type", "is required")
    for column, limit in _MAX_LENGTHS.items():
        if len(clean.get(column, "")) > limit:
            raise InvalidField(column, f"must be at most {limit} characters")
    online = clean.get("online", "").lower()
    if online not in _ONLINE_WORDS:
        raise InvalidField("online", "must be true or false")
    brand_id = _integer(clean.get("brand_id", ""), "brand_id")
    return ControllerSpec(
        serial_number=serial,
        mac=mac,
        type=clean["type"],
        name=clean.get("name", ""),
        firmware_version=clean.get("firmware_version", ""),
        brand_id=1 if brand_id is None else brand_id,
        device_group=clean.get("device_group", ""),
        room_id=_integer(clean.get("room_id", ""), "room_id"),
        claim_code=clean.get("claim_code") or None,
        owner=clean.get("owner") or None,
        online=online in _TRUE,
        device_secret=_device_secret(values.get("device_secret") or ""),
    )
