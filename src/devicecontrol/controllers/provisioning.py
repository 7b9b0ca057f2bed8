"""Registering controllers: one at a time (``controllers add``) or from a CSV file.

Every row is checked before anything is written; a file with a bad row writes nothing
unless the caller chose to skip bad rows. A serial already registered with the same
values is left alone, so importing the same file twice is harmless.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Row, select
from sqlalchemy.ext.asyncio import AsyncConnection

from devicecontrol.clock import utcnow
from devicecontrol.controllers import repository
from devicecontrol.controllers.identity import (
    claim_code_digest,
    is_serial_number,
    normalize_device_mac,
)
from devicecontrol.errors import BadRequest, Conflict, InvalidField
from devicecontrol.runtime import Runtime
from devicecontrol.tables import controllers, users
from devicecontrol.users.identity import username_key

REQUIRED_COLUMNS = ("serial_number", "mac", "type")
OPTIONAL_COLUMNS = (
    "name",
    "firmware_version",
    "brand_id",
    "device_group",
    "room_id",
    "claim_code",
    "owner",
    "online",
)
_MAX_LENGTHS = {"type": 64, "name": 200, "firmware_version": 64, "device_group": 64}
_TRUE = {"1", "true", "yes", "y", "on", "online"}
_FALSE = {"0", "false", "no", "n", "off", "offline", ""}
_LOOKUP_CHUNK = 500


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
    claim_code: str | None = None
    owner: str | None = None
    online: bool = False


@dataclass
class ImportReport:
    added: int = 0
    unchanged: int = 0
    problems: list[tuple[int, str]] = field(default_factory=list)  # (line, what is wrong)

    def problem_lines(self) -> list[str]:
        return [f"line {line}: {message}" for line, message in sorted(self.problems)]


def _integer(raw: str, column: str) -> int | None:
    if raw.strip() == "":
        return None
    try:
        value = int(raw)
    except ValueError:
        raise InvalidField(column, "must be an integer") from None
    if not 0 <= value < 2**31:
        raise InvalidField(column, "must be between 0 and 2147483647")
    return value


def parse_spec(values: dict[str, str]) -> ControllerSpec:
    """Check one controller's fields as text (a CSV row or the CLI's options)."""
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
    if online not in _TRUE | _FALSE:
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
    )


def _same_registration(existing: Row, spec: ControllerSpec, owner_id: int | None) -> bool:
    code_matches = (
        existing.claim_code_digest is None
        if spec.claim_code is None
        else existing.claim_code_digest == claim_code_digest(spec.serial_number, spec.claim_code)
    )
    return (
        code_matches
        and all(
            getattr(existing, name) == getattr(spec, name)
            for name in ("mac", "type", "name", "firmware_version", "brand_id", "device_group")
        )
        and (spec.owner is None or existing.user_id == owner_id)
    )


def _row_values(spec: ControllerSpec, owner_id: int | None) -> dict[str, Any]:
    values = asdict(spec)
    code, _ = values.pop("claim_code"), values.pop("owner")
    return {
        **values,
        "claim_code_digest": claim_code_digest(spec.serial_number, code) if code else None,
        "user_id": owner_id,
        "created_at": utcnow(),
    }


async def _existing_by_serial(connection: AsyncConnection, serials: list[str]) -> dict[str, Row]:
    found: dict[str, Row] = {}
    for start in range(0, len(serials), _LOOKUP_CHUNK):
        chunk = serials[start : start + _LOOKUP_CHUNK]
        rows = await connection.execute(
            select(controllers).where(controllers.c.serial_number.in_(chunk))
        )
        found.update({row.serial_number: row for row in rows})
    return found


async def _active_owner_ids(connection: AsyncConnection, emails: Iterable[str]) -> dict[str, int]:
    keys = sorted({username_key(e) for e in emails})
    found: dict[str, int] = {}
    for start in range(0, len(keys), _LOOKUP_CHUNK):
        chunk = keys[start : start + _LOOKUP_CHUNK]
        rows = await connection.execute(
            select(users.c.username_key, users.c.id).where(
                users.c.username_key.in_(chunk), users.c.disabled_at.is_(None)
            )
        )
        found.update({row.username_key: row.id for row in rows})
    return found


async def _register(
    connection: AsyncConnection, spec: ControllerSpec, owner_id: int | None
) -> None:
    controller = await repository.insert_controller(connection, _row_values(spec, owner_id))
    if owner_id is not None:
        await repository.insert_assignment(
            connection, controller, user_id=owner_id, room_id=spec.room_id, now=utcnow()
        )


async def add_controller(runtime: Runtime, spec: ControllerSpec) -> None:
    """Register one controller; an existing serial number is an error."""
    async with runtime.database.write() as connection:
        if await repository.find_by_serial(connection, spec.serial_number) is not None:
            raise Conflict(f"serial number {spec.serial_number} is already registered")
        owner_id = None
        if spec.owner is not None:
            owner_id = (await _active_owner_ids(connection, [spec.owner])).get(
                username_key(spec.owner)
            )
            if owner_id is None:
                raise InvalidField("owner", f"no active account is named {spec.owner}")
        await _register(connection, spec, owner_id)


def read_csv(path: Path) -> tuple[list[tuple[int, dict[str, str]]], list[tuple[int, str]]]:
    """The data rows with their line numbers, or the problems that stop the whole file."""
    try:
        handle = path.open(newline="", encoding="utf-8-sig")
    except OSError as exc:
        raise BadRequest(f"cannot read {path}: {exc.strerror}") from None
    with handle:
        try:
            reader = csv.DictReader(handle)
            header = [h.strip() for h in reader.fieldnames or []]
            missing = [c for c in REQUIRED_COLUMNS if c not in header]
            unknown = [c for c in header if c not in REQUIRED_COLUMNS + OPTIONAL_COLUMNS]
            if missing or unknown:
                detail = "; ".join(
                    part
                    for part in (
                        f"missing column(s): {', '.join(missing)}" if missing else "",
                        f"unknown column(s): {', '.join(unknown)}" if unknown else "",
                    )
                    if part
                )
                raise BadRequest(f"{path}: header: {detail}")
            reader.fieldnames = header
            rows = [(reader.line_num, dict(row)) for row in reader]
        except (UnicodeDecodeError, csv.Error) as exc:
            raise BadRequest(f"{path}: not a UTF-8 CSV file ({exc})") from None
    problems = [
        (line, f"{len(row[None])} more field(s) than the header has")
        for line, row in rows
        if None in row
    ]
    return rows, problems


async def import_controllers(runtime: Runtime, path: Path, *, skip_invalid: bool) -> ImportReport:
    """Check every row, then register the good ones in one transaction."""
    rows, problems = read_csv(path)
    report = ImportReport(problems=problems)
    bad_lines = {line for line, _ in problems}
    specs: list[tuple[int, ControllerSpec]] = []
    seen: dict[str, int] = {}
    for line, row in rows:
        if line in bad_lines:
            continue
        try:
            spec = parse_spec({k: v for k, v in row.items() if k is not None})
        except InvalidField as exc:
            report.problems.append((line, exc.detail))
            continue
        if spec.serial_number in seen:
            report.problems.append(
                (
                    line,
                    f"serial_number {spec.serial_number} repeats line {seen[spec.serial_number]}",
                )
            )
            continue
        seen[spec.serial_number] = line
        specs.append((line, spec))
    async with runtime.database.write() as connection:
        existing = await _existing_by_serial(connection, [s.serial_number for _, s in specs])
        owners = await _active_owner_ids(connection, [s.owner for _, s in specs if s.owner])
        to_add: list[tuple[ControllerSpec, int | None]] = []
        for line, spec in specs:
            owner_id = owners.get(username_key(spec.owner)) if spec.owner else None
            if spec.owner and owner_id is None:
                report.problems.append((line, f"owner: no active account is named {spec.owner}"))
            elif spec.serial_number in existing:
                if _same_registration(existing[spec.serial_number], spec, owner_id):
                    report.unchanged += 1
                else:
                    report.problems.append(
                        (
                            line,
                            f"serial_number {spec.serial_number} is registered with other values",
                        )
                    )
            else:
                to_add.append((spec, owner_id))
        if report.problems and not skip_invalid:
            return report  # nothing has been written in this transaction
        await _bulk_register(connection, to_add)
        report.added = len(to_add)
    return report


async def _bulk_register(
    connection: AsyncConnection, specs: list[tuple[ControllerSpec, int | None]]
) -> None:
    """Register in the file's order (the owners' lists are in registration order)."""
    unowned: list[dict[str, Any]] = []  # a run of unowned rows goes in as one statement
    for spec, owner_id in specs:
        if owner_id is None:
            unowned.append(_row_values(spec, None))
            continue
        if unowned:
            await connection.execute(controllers.insert(), unowned)
            unowned = []
        await _register(connection, spec, owner_id)
    if unowned:
        await connection.execute(controllers.insert(), unowned)
