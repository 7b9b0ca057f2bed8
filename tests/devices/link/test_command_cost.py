"""What a command costs the device link, counted rather than timed (issue 38's guard): the
SQL statements the link runs from a command made elsewhere to its result stored.

Under load a command's round trip is those statements, each waiting its turn on a loop
(and, on SQLite, a write lock) shared with a fleet's readings; the round trip grew when
they grew.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import msgspec
import pytest

from devicecontrol.devices.commands import service as commands
from devicecontrol.devices.link import event_upkeep, rotation
from devicecontrol.runtime import Runtime
from tests.controllers.helpers import counted_statements
from tests.devices.link.support import (
    device,
    eventually,
    next_command,
    owned,
    provision_owned,
    running_link,
)

SERIAL = "PLUG-COST"
COMMANDS = f"devices/{SERIAL}/commands"
RUNS = 20
# read the queued command, mark it sent and log its event; with its result: last_seen,
# find the command, store the result and log its event (each move returns the row it
# moved: no read back). One more statement per command fails this
MOST_STATEMENTS_PER_COMMAND = 7  # on PostgreSQL too: an event takes the log's lock in its INSERT


@pytest.fixture
async def plug(runtime) -> str:
    return await provision_owned(runtime, SERIAL)


async def test_a_command_costs_the_link_a_fixed_number_of_statements(
    runtime, settings, plug, monkeypatch
):
    # the link's chores (expiring commands, rolling readings up, the rotated-secret check)
    # run once at its start, then not again during the count
    monkeypatch.setattr(event_upkeep, "EXPIRE_EVERY_S", 3600.0)
    monkeypatch.setattr(rotation, "WATCH_S", 3600.0)
    app = Runtime.from_settings(settings)  # the HTTP worker, in real life another process
    try:
        owner = await owned(app, plug)  # read before counting: the count is the link's
        async with running_link(runtime) as link, device(link, plug) as client:
            await client.subscribe(COMMANDS, qos=1)
            await asyncio.sleep(0.3)  # the subscription's own statements are not counted
            with counted_statements(runtime.database) as statements:
                for _ in range(RUNS):
                    made = await commands.create_command(
                        app, owner, name="switch_on_off", fields={"state": "on"}, ttl_s=300,
                        strict=True,
                    )  # fmt: skip
                    received = await next_command(client)
                    assert received["id"] == made.public_id
                    result = {"id": made.public_id, "status": "succeeded"}
                    await client.publish(f"{COMMANDS}/result", msgspec.json.encode(result), qos=1)
                    await eventually(
                        lambda made=made: _succeeded(app, owner, made), what="the result stored"
                    )
        per_command = len(statements) / RUNS
        assert per_command <= MOST_STATEMENTS_PER_COMMAND, Counter(statements).most_common()
    finally:
        await app.close()


async def _succeeded(app: Runtime, owner: commands.OwnedDevice, made: Any) -> bool:
    return (await commands.get_command(app, owner, made.public_id)).status == "succeeded"
