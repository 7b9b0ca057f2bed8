"""``controllers add`` racing another registration of the same serial: a Conflict, never an
outage. On PostgreSQL both can miss each other's row and reach the unique key.
"""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import func, select

from devicecontrol.clock import utcnow
from devicecontrol.controllers import repository
from devicecontrol.controllers.provisioning import ControllerSpec, add_controller
from devicecontrol.database.tables import controllers
from devicecontrol.errors import Conflict
from devicecontrol.runtime import Runtime
from tests.lock_waits import until_waiting_on_a_lock

SERIAL = "RACE-ADD-1"
SPEC = ControllerSpec(serial_number=SERIAL, mac="AABBCCDDEE01", type="smart_plug")
ROUNDS = 5


async def registered(runtime: Runtime, serial_number: str) -> int:
    async with runtime.database.read() as connection:
        query = select(func.count()).where(controllers.c.serial_number == serial_number)
        return (await connection.execute(query)).scalar_one()


async def test_add_while_another_transaction_registers_the_serial_is_a_conflict(runtime):
    """Deterministic: the serial is inserted and left uncommitted until the add waits."""
    async with runtime.database.write() as connection:
        await repository.insert_controller(connection, SPEC.row_values(None, utcnow()))
        adding = asyncio.create_task(add_controller(runtime, SPEC))
        await until_waiting_on_a_lock(runtime, adding)
    with pytest.raises(Conflict) as refused:
        await adding
    assert refused.value.detail == f"serial number {SERIAL} is already registered"
    assert await registered(runtime, SERIAL) == 1


async def test_concurrent_adds_of_one_serial_register_it_once_and_refuse_the_rest(runtime):
    for round_number in range(ROUNDS):
        spec = ControllerSpec(
            serial_number=f"{SERIAL}-{round_number}", mac="AABBCCDDEE02", type="smart_plug"
        )
        outcomes = await asyncio.gather(
            *(add_controller(runtime, spec) for _ in range(4)), return_exceptions=True
        )
        refusals = [o for o in outcomes if o is not None]
        assert len(refusals) == 3, outcomes
        assert all(isinstance(o, Conflict) and "already registered" in o.detail for o in refusals)
        assert await registered(runtime, spec.serial_number) == 1
