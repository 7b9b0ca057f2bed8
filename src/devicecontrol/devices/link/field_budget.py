"""Each controller's budget of field names (``readings/fields.py``): a reading's names are
let through while its controller has room, its type's own always; a name past the budget is
left out of the stored reading and counted (``devicecontrol_device_fields_dropped_total``).
The rest of the reading is stored and acknowledged: what the device measures by design is
never lost to what it invents.

The names each controller has been let report are kept in ``reading_fields``, written in
the transaction of the batch that brought them, and in memory once committed, so that a
reading whose names are all known (every reading of a device that invents nothing) costs a
set comparison and no query. A reading with a name this link has not seen reads the
controller's names again first: another link process may have added some. Two links taking
new names of one controller in the same instant can each fill the same room: the budget may
be passed by what one batch of each brings, never without bound.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

import msgspec

from devicecontrol.database.engine import Writer
from devicecontrol.devices.identity import DeviceIdentity
from devicecontrol.devices.readings import repository as readings_repository
from devicecontrol.devices.readings.fields import MAX_FIELDS, declared_fields
from devicecontrol.observability.metrics import DEVICE_FIELDS_DROPPED

__all__ = ["FieldBudget", "Named"]


class Named(Protocol):
    """A reading waiting for the database: its device, stored JSON and field names."""

    device: DeviceIdentity
    content: str
    names: tuple[str, ...]


class FieldBudget:
    def __init__(self) -> None:
        self._known: dict[int, frozenset[str]] = {}  # committed, by controller id

    async def apply(self, connection: Writer, group: Sequence[Named]) -> Callable[[], None]:
        """Within the batch's transaction: let the group's new names in while there is room,
        leave the others out of their readings; what to remember once it has committed."""
        known = self._known
        novel = {
            reading.device.controller_id
            for reading in group
            if not known.get(reading.device.controller_id, frozenset()).issuperset(reading.names)
        }
        if not novel:
            return _nothing
        names = await readings_repository.field_names_of(connection, sorted(novel))
        added: list[tuple[int, str]] = []
        for reading in group:
            controller_id = reading.device.controller_id
            if controller_id not in names:
                continue
            allowed = names[controller_id]
            own = declared_fields(reading.device.type)
            invented = sum(1 for name in allowed if name not in own)
            dropped = []
            for name in reading.names:
                if name in allowed:
                    continue
                if name in own or invented < MAX_FIELDS:
                    allowed.add(name)
                    added.append((controller_id, name))
                    invented += name not in own
                else:
                    dropped.append(name)
            if dropped:
                _leave_out(reading, dropped)
        await readings_repository.add_field_names(connection, added)

        def remember() -> None:
            for controller_id, allowed in names.items():
                known[controller_id] = frozenset(allowed)

        return remember


def _leave_out(reading: Named, dropped: list[str]) -> None:
    """The reading without the names past its controller's budget, counted."""
    gone = set(dropped)
    fields = msgspec.json.decode(reading.content)
    reading.content = msgspec.json.encode(
        {name: value for name, value in fields.items() if name not in gone}
    ).decode()
    reading.names = tuple(name for name in reading.names if name not in gone)
    DEVICE_FIELDS_DROPPED.inc(len(dropped))


def _nothing() -> None:
    """Every name was known: nothing to remember."""
