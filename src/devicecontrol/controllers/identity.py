"""Serial numbers and MAC addresses: what is valid, and the one stored form of a MAC."""

from __future__ import annotations

import re

from devicecontrol.auth.tokens import digest

# anchored for the OpenAPI pattern; matched with fullmatch, so a trailing newline fails too
SERIAL_NUMBER = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_MAC_SEPARATORS = str.maketrans("", "", ":-.")
_HEX = re.compile(r"[0-9A-F]*")
MAC_LENGTHS = (12, 16)


def is_serial_number(value: str) -> bool:
    return SERIAL_NUMBER.fullmatch(value) is not None


def normalize_mac(value: str) -> str | None:
    """Uppercase hex without separators, or None when anything else is in it."""
    if not value.isascii():  # before upper(): "\ufb00".upper() is "FF"
        return None
    cleaned = value.translate(_MAC_SEPARATORS).upper()
    return cleaned if _HEX.fullmatch(cleaned) else None


def normalize_device_mac(value: str) -> str | None:
    """A device's MAC: 12 or 16 hex digits once separators are gone, else None."""
    cleaned = normalize_mac(value)
    return cleaned if cleaned is not None and len(cleaned) in MAC_LENGTHS else None


def claim_code_digest(serial_number: str, claim_code: str) -> str:
    """Claim codes are stored like tokens: a SHA-256 digest, salted with the serial number."""
    return digest(f"{serial_number}\x1f{claim_code}")
