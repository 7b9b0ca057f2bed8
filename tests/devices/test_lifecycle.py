"""The command lifecycle (contract §9): transitions listed once, terminal states final."""

from __future__ import annotations

from datetime import timedelta

import pytest

from devicecontrol.clock import utcnow
from devicecontrol.controllers import service as controllers_service
from devicecontrol.devices.commands import lifecycle
from devicecontrol.devices.commands import service as commands
from devicecontrol.devices.commands import status as command_status
from devicecontrol.errors import TooManyRequests
from tests.factories import make_controller, make_user

SERIAL = "MEL-1"


@pytest.fixture
async def device(runtime):
    user_id = await make_user(runtime, "ana@example.com")
    await make_user(runtime, "bob@example.com")
    await make_controller(runtime, SERIAL, type="melissa", owner="ana@example.com")
    return user_id, await commands.owned_device(runtime, user_id, SERIAL)


async def new_command(runtime, owned, ttl_s: int = 300):
    return await commands.create_command(
        runtime, owned, name="turn_led_off", fields={}, ttl_s=ttl_s, strict=True
    )


async def status_of(runtime, owned, command) -> str:
    return commands.shown(await commands.get_command(runtime, owned, command.public_id))["status"]


def test_every_transition_leads_out_of_an_unfinished_state_and_terminal_ones_lead_nowhere():
    for status in tuple(command_status.CommandStatus):
        assert status in command_status.TRANSITIONS
    for terminal in command_status.TERMINAL:
        assert command_status.TRANSITIONS[terminal] == frozenset()
    assert command_status.sources_of(command_status.SENT) == (command_status.QUEUED,)
    assert set(command_status.sources_of(command_status.EXPIRED)) == {
        command_status.QUEUED,
        command_status.SENT,
    }


async def test_queued_then_sent_then_succeeded_and_then_nothing_changes(runtime, device):
    _, owned = device
    command = await new_command(runtime, owned)
    assert await status_of(runtime, owned, command) == "queued"
    assert await commands.mark_sent(runtime, owned.serial_number, command)
    assert await status_of(runtime, owned, command) == "sent"
    done = await commands.record_result(
        runtime,
        owned.controller_id,
        owned.serial_number,
        {"id": command.public_id, "status": "succeeded"},
    )
    assert done.dropped is None
    assert await status_of(runtime, owned, command) == "succeeded"
    late = await commands.record_result(
        runtime,
        owned.controller_id,
        owned.serial_number,
        {"id": command.public_id, "status": "failed"},
    )
    assert late.dropped == "late_result"
    assert await status_of(runtime, owned, command) == "succeeded"


async def test_an_unknown_or_malformed_result_is_dropped(runtime, device):
    _, owned = device
    unknown = await commands.record_result(
        runtime, owned.controller_id, owned.serial_number, {"id": "nope", "status": "succeeded"}
    )
    assert unknown.dropped == "unknown_command"
    command = await new_command(runtime, owned)
    for bad in (
        {"id": command.public_id, "status": "done"},
        {"id": command.public_id, "status": "failed", "result": [1]},
        {"id": command.public_id, "status": "failed", "error": 7},
        {"status": "failed"},
    ):
        outcome = await commands.record_result(
            runtime, owned.controller_id, owned.serial_number, bad
        )
        assert outcome.dropped == "malformed", bad
    assert await status_of(runtime, owned, command) == "queued"


async def test_a_command_past_its_time_shows_expired_and_is_never_sent(runtime, device, clock):
    _, owned = device
    command = await new_command(runtime, owned, ttl_s=1)
    clock.advance(0.5)
    assert await status_of(runtime, owned, command) == "queued"
    clock.advance(1)
    assert await status_of(runtime, owned, command) == "expired"
    assert not await commands.mark_sent(runtime, owned.serial_number, command)
    result = await commands.record_result(
        runtime,
        owned.controller_id,
        owned.serial_number,
        {"id": command.public_id, "status": "succeeded"},
    )
    assert result.dropped == "late_result"
    assert await status_of(runtime, owned, command) == "expired"


async def test_a_hand_over_fails_the_old_ownerships_unfinished_commands(runtime, device):
    user_id, owned = device
    queued = await new_command(runtime, owned)
    sent = await new_command(runtime, owned)
    assert await commands.mark_sent(runtime, owned.serial_number, sent)
    finished = await new_command(runtime, owned)
    await commands.mark_sent(runtime, owned.serial_number, finished)
    await commands.record_result(
        runtime,
        owned.controller_id,
        owned.serial_number,
        {"id": finished.public_id, "status": "succeeded"},
    )
    await controllers_service.reassign_controller(
        runtime, user_id, SERIAL, new_owner="bob@example.com"
    )
    for command, status in ((queued, "failed"), (sent, "failed"), (finished, "succeeded")):
        row = await commands.get_command(runtime, owned, command.public_id)
        assert (row.status, row.error) == (
            status,
            "owner changed" if status == "failed" else None,
        )
    # a result arriving after the hand-over changes nothing
    late = await commands.record_result(
        runtime,
        owned.controller_id,
        owned.serial_number,
        {"id": sent.public_id, "status": "succeeded"},
    )
    assert late.dropped == "late_result"


async def test_a_release_fails_the_unfinished_commands_too(runtime, device):
    user_id, owned = device
    queued = await new_command(runtime, owned)
    await controllers_service.release_controller(runtime, user_id, SERIAL)
    row = await commands.get_command(runtime, owned, queued.public_id)
    assert (row.status, row.error) == ("failed", "owner changed")


async def test_at_most_100_unfinished_commands_per_controller(runtime, device, clock):
    _, owned = device
    for _ in range(commands.MAX_UNFINISHED):
        await new_command(runtime, owned, ttl_s=2)
    with pytest.raises(TooManyRequests):
        await new_command(runtime, owned)
    clock.advance(3)  # expired ones are finished: room again
    await new_command(runtime, owned)


async def test_expire_all_overdue_stores_what_reads_already_show(runtime, device, clock):
    _, owned = device
    command = await new_command(runtime, owned, ttl_s=1)
    clock.advance(2)
    async with runtime.database.write() as connection:
        assert len(await lifecycle.expire_all_overdue(connection, now=utcnow())) == 1
    row = await commands.get_command(runtime, owned, command.public_id)
    assert row.status == "expired"
    assert row.completed_at == command.expires_at
    assert row.completed_at <= utcnow() - timedelta(seconds=1)
