"""The field names a controller's readings may have. A device chooses them, so every place
that lists them (the CSV export's columns, the summary's fields and rollups, the page's
chart) would cost as much as a device cares to invent: the link lets each controller report
at most ``MAX_FIELDS`` distinct names besides its type's own, which it always takes
(docs/DEVICES.md, "Limits").
"""

from __future__ import annotations

__all__ = ["MAX_FIELDS", "declared_fields"]

MAX_FIELDS = 64  # distinct names a controller may report besides its type's own

_CLIMATE = frozenset({"temp", "humidity", "raw_temperature", "raw_humidity"})
# what each type's readings hold (contract §9 shows melissa's and smart_plug's)
_DECLARED: dict[str, frozenset[str]] = {
    "melissa": _CLIMATE,
    "smart_plug": frozenset({"relay_state", "power"}),
    "bobbie": _CLIMATE | {"relay_state"},
    "vicki": frozenset({"temp", "battery", "keepalive"}),
}


def declared_fields(device_type: str) -> frozenset[str]:
    """The fields a controller of ``device_type`` reports by design (none for a type the
    service does not describe)."""
    return _DECLARED.get(device_type, frozenset())
