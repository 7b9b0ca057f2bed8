"""The rules of the controller registry: who sees what, who may claim or hand over what."""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from functools import partial
from typing import Any

from sqlalchemy import Row
from sqlalchemy.exc import IntegrityError

from devicecontrol.auth.schemas import Caller
from devicecontrol.auth.service import authenticate_bearer, authenticate_bearer_reading
from devicecontrol.clock import utcnow
from devicecontrol.config import ThrottleRule
from devicecontrol.controllers import repository
from devicecontrol.controllers.identity import claim_code_digest, is_serial_number, normalize_mac
from devicecontrol.database.engine import Writer
from devicecontrol.database.pages import Page, PageRequest
from devicecontrol.devices import service as devices
from devicecontrol.devices.commands import lifecycle
from devicecontrol.devices.commands import service as commands
from devicecontrol.devices.commands.lifecycle import OWNER_CHANGED
from devicecontrol.errors import Conflict, Forbidden, InvalidField, NotFound, Unprocessable
from devicecontrol.events import log as events_log
from devicecontrol.http.paging import page_request
from devicecontrol.observability.audit import AuditEvent
from devicecontrol.runtime import Runtime
from devicecontrol.throttling import rules as throttling
from devicecontrol.users.identity import email_problem, username_key
from devicecontrol.users.repository import find_active_user_id

# OFFSET is a signed 64-bit integer on both databases
LARGEST_SQL_OFFSET = 2**63 - 1
RELEASED = "released"  # why a stream loses a controller its owner released


@dataclass(frozen=True, slots=True)
class ControllerQuery:
    """A validated list request: filters are normalised, page numbers in range."""

    type: str | None
    mac: str | None
    paging: PageRequest


def _not_yours(serial_number: str) -> NotFound:
    return NotFound(f"No controller with serial number {serial_number} is assigned to you.")


def build_query(
    runtime: Runtime,
    *,
    type_: str | None,
    mac: str | None,
    page: int | str | None,
    page_size: int | str | None,
) -> ControllerQuery:
    """Check the list parameters against the contract; empty filters mean no filter."""
    paging = page_request(runtime.settings, page, page_size)
    if type_ is not None and "\x00" in type_:  # PostgreSQL rejects NUL in text outright
        raise InvalidField("type", "must not contain NUL characters")
    normalized_mac = None
    if mac:
        normalized_mac = normalize_mac(mac)
        if normalized_mac is None:  # separators alone ("-:") leave "": no filter, like mac=
            raise InvalidField("mac", "must be hex digits, optionally separated by : - or .")
    return ControllerQuery(type=type_ or None, mac=normalized_mac or None, paging=paging)


async def list_controllers(runtime: Runtime, user_id: int, query: ControllerQuery) -> Page:
    """One page of the caller's controllers in registration order; past the end is empty."""
    paging = query.paging
    filters = {"type_": query.type, "mac": query.mac}
    async with runtime.database.read() as connection:
        rows = []
        if paging.offset <= LARGEST_SQL_OFFSET:  # keeps huge page numbers from the database
            rows = await repository.list_owned(
                connection, user_id, **filters, limit=paging.page_size, offset=paging.offset
            )
        # an empty page (no controllers, or past the end) still reports the total
        total = (
            rows[0].total if rows else await repository.count_owned(connection, user_id, **filters)
        )
    return Page(rows=rows, total=total, page_count=paging.page_count(total))


async def get_controller(runtime: Runtime, user_id: int, serial_number: str) -> Row:
    if is_serial_number(serial_number):
        async with runtime.database.read() as connection:
            row = await repository.find_owned(connection, user_id, serial_number)
        if row is not None:
            return row
    raise _not_yours(serial_number)


@dataclass(frozen=True, slots=True)
class ControllerView:
    """The single read: the controller (``repository.BODY_COLUMNS``) and its settings."""

    row: Row
    command_log: dict[str, Any] | None


def _view(row: Row) -> ControllerView:
    return ControllerView(row, devices.command_log(row.type, row.settings_params))


async def controller_detail(runtime: Runtime, user_id: int, serial_number: str) -> ControllerView:
    """The caller's controller and, for a melissa, its current settings (``command_log``)."""
    return _view(await get_controller(runtime, user_id, serial_number))


async def controller_detail_as_bearer(
    runtime: Runtime, authorization: str | None, serial_number: str
) -> tuple[Caller, ControllerView]:
    """The token check and ``controller_detail`` in one statement (one round trip) when
    the token is not in the cache; the same answers as the two one after the other."""
    if not is_serial_number(serial_number):  # the token first, then the usual 404
        await authenticate_bearer(runtime, authorization)
        raise _not_yours(serial_number)
    read = partial(repository.find_owned_with_token, serial_number=serial_number)
    caller, row = await authenticate_bearer_reading(runtime, authorization, read)
    if row is None:  # the token was in the cache
        return caller, await controller_detail(runtime, caller.user_id, serial_number)
    if row.id is None:
        raise _not_yours(serial_number)
    return caller, _view(row)


async def _current_or_new_record(connection: Writer, controller: Row, user_id: int) -> Row:
    """The caller's active record; made now if an owner somehow has none."""
    record = await repository.find_active_assignment(connection, controller.id)
    if record is not None and record.user_id == user_id:
        return record
    await repository.close_active_assignment(connection, controller.id, utcnow())
    return await repository.insert_assignment(
        connection, controller, user_id=user_id, room_id=controller.room_id, now=utcnow()
    )


def _claim_code_refusal(controller: Row, claim_code: str | None) -> Forbidden | None:
    if claim_code is None:
        return Forbidden("This controller needs its claim code (claim_code) to be assigned.")
    presented = claim_code_digest(controller.serial_number, claim_code)
    if not hmac.compare_digest(presented, controller.claim_code_digest):
        return Forbidden("Wrong claim code for this controller.")
    return None


def _audited(event: str, user_id: int) -> AuditEvent:
    """The audit line of an ownership change; its serial number is set by ``_matched``."""
    return AuditEvent(event, user_id=user_id, serial_number=None)


def _matched(event: AuditEvent, controller: Row) -> None:
    """Name the controller in the audit line: only a serial that matched one is written."""
    event.fields["serial_number"] = controller.serial_number


def _claim_throttles(
    runtime: Runtime, user_id: int, serial_number: str
) -> list[tuple[throttling.Subject, ThrottleRule]]:
    settings = runtime.settings
    return [
        ((throttling.CLAIM_CONTROLLER, serial_number), settings.throttle_claim_per_controller),
        ((throttling.CLAIM_USER, str(user_id)), settings.throttle_claim_per_user),
    ]


async def assign_controller(
    runtime: Runtime, user_id: int, serial_number: str, *, claim_code: str | None
) -> Row:
    """Give an unowned controller to the caller; idempotent for its owner.

    Wrong or missing claim codes are counted per controller and per user, and throttled.
    """
    with _audited("assign", user_id) as event:
        record = await _assign(runtime, user_id, serial_number, event, claim_code=claim_code)
    await events_log.announce(runtime.changes)
    return record


async def _assign(
    runtime: Runtime, user_id: int, serial_number: str, event: AuditEvent, *, claim_code: str | None
) -> Row:
    if not is_serial_number(serial_number):
        raise NotFound(f"No controller with serial number {serial_number} exists.")
    throttles = _claim_throttles(runtime, user_id, serial_number)
    refusal = None
    try:
        async with runtime.database.write() as connection:
            controller = await repository.find_by_serial(connection, serial_number, lock=True)
            if controller is None:
                raise NotFound(f"No controller with serial number {serial_number} exists.")
            _matched(event, controller)  # a claim of another's controller is audited by serial
            if controller.user_id == user_id:
                return await _current_or_new_record(connection, controller, user_id)
            if controller.user_id is not None:
                raise Conflict(f"Controller {serial_number} belongs to another account.")
            if controller.claim_code_digest is not None:
                await throttling.ensure_allowed(connection, throttles, utcnow(), what="claims")
                refusal = _claim_code_refusal(controller, claim_code)
            if refusal is None:
                if not await repository.claim_if_unowned(connection, controller.id, user_id):
                    raise Conflict(f"Controller {serial_number} belongs to another account.")
                record = await repository.insert_assignment(
                    connection,
                    controller,
                    user_id=user_id,
                    room_id=controller.room_id,
                    now=utcnow(),
                )
                await _log_owner_change(connection, controller, [], None, user_id)
                return record
            # counted in the transaction that checked the limit, under its locks: concurrent
            # guesses cannot all pass the check before one of them is counted (throttling)
            await throttling.record_failures(connection, [s for s, _ in throttles], utcnow())
    except IntegrityError:  # a racing assign won the active-record constraint
        raise Conflict(f"Controller {serial_number} belongs to another account.") from None
    raise refusal  # only once the failure it counts is committed


async def reassign_controller(
    runtime: Runtime, user_id: int, serial_number: str, *, new_owner: str
) -> Row:
    """Hand the caller's controller to another active account, closing the current record."""
    with _audited("reassign", user_id) as event:
        record = await _reassign(runtime, user_id, serial_number, event, new_owner=new_owner)
    await events_log.announce(runtime.changes)
    return record


async def _reassign(
    runtime: Runtime, user_id: int, serial_number: str, event: AuditEvent, *, new_owner: str
) -> Row:
    problem = email_problem(new_owner)
    if problem:
        raise InvalidField("owner", problem)
    if not is_serial_number(serial_number):
        raise _not_yours(serial_number)
    try:
        async with runtime.database.write() as connection:
            controller = await repository.find_by_serial(connection, serial_number, lock=True)
            if controller is None or controller.user_id != user_id:
                raise _not_yours(serial_number)
            _matched(event, controller)
            target_id = await find_active_user_id(connection, username_key(new_owner))
            if target_id is None:
                raise Unprocessable("owner", f"no active account is named {new_owner}")
            event.fields["new_owner_id"] = target_id
            if target_id == user_id:
                return await _current_or_new_record(connection, controller, user_id)
            moved = await repository.transfer_if_owned(
                connection, controller.id, from_user_id=user_id, to_user_id=target_id
            )
            if not moved:
                raise _not_yours(serial_number)
            now = utcnow()
            await repository.close_active_assignment(connection, controller.id, now)
            await repository.delete_automations(connection, controller.id)
            # a command belongs to the ownership it was made under (contract §9)
            failed = await lifecycle.fail_all_for_owner_change(connection, controller.id, now=now)
            record = await repository.insert_assignment(
                connection, controller, user_id=target_id, room_id=None, now=now
            )
            await _log_owner_change(connection, controller, failed, user_id, target_id)
            return record
    except IntegrityError:
        raise Conflict(f"Controller {serial_number} changed hands meanwhile; try again.") from None


async def release_controller(runtime: Runtime, user_id: int, serial_number: str) -> Row:
    """The owner gives the controller up: its record closes, it becomes unowned and claimable.

    Its room goes with the owner, as on a reassign; a claim code, if any, still applies.
    """
    with _audited("release", user_id) as event:
        record = await _release(runtime, user_id, serial_number, event)
    await events_log.announce(runtime.changes)
    return record


async def _release(runtime: Runtime, user_id: int, serial_number: str, event: AuditEvent) -> Row:
    if not is_serial_number(serial_number):
        raise _not_yours(serial_number)
    async with runtime.database.write() as connection:
        controller = await repository.find_by_serial(connection, serial_number, lock=True)
        if controller is None or controller.user_id != user_id:
            raise _not_yours(serial_number)
        _matched(event, controller)
        record = await _current_or_new_record(connection, controller, user_id)
        if not await repository.release_if_owned(connection, controller.id, user_id):
            raise _not_yours(serial_number)
        now = utcnow()
        await repository.delete_automations(connection, controller.id)
        failed = await lifecycle.fail_all_for_owner_change(connection, controller.id, now=now)
        closed = await repository.close_assignment(connection, record.id, now)
        await _log_owner_change(connection, controller, failed, user_id, None)
        return closed


async def _log_owner_change(
    connection: Writer,
    controller: Row,
    failed: list[Row],
    old_owner: int | None,
    new_owner: int | None,
) -> None:
    """The events of an owner change, last in its transaction (events/log.py): the old
    ownership's commands failed, then the old owner's streams lose the controller and the
    new owner's gain it."""
    serial_number = controller.serial_number
    changes = [commands.command_event(serial_number, command) for command in failed]
    if old_owner is not None:
        reason = OWNER_CHANGED if new_owner is not None else RELEASED
        changes.append(events_log.lost(controller.id, serial_number, old_owner, reason))
    if new_owner is not None:
        changes.append(
            events_log.gained(controller.id, serial_number, new_owner, bool(controller.online))
        )
    await events_log.append(connection, changes)


async def assignment_history(
    runtime: Runtime, user_id: int, serial_number: str, paging: PageRequest
) -> Page:
    """The owner's view of every assignment record of the controller, newest first."""
    if not is_serial_number(serial_number):
        raise _not_yours(serial_number)
    async with runtime.database.read() as connection:
        controller = await repository.find_by_serial(connection, serial_number)
        if controller is None or controller.user_id != user_id:
            raise _not_yours(serial_number)
        total = await repository.count_assignments(connection, controller.id)
        rows = []
        if paging.offset < total:
            rows = await repository.list_assignments(
                connection, controller.id, limit=paging.page_size, offset=paging.offset
            )
    return Page(rows=rows, total=total, page_count=paging.page_count(total))
