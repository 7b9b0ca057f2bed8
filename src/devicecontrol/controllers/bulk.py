"""The rules of ``controllers import``, applied a batch of rows at a time.

Each batch costs a few set-based queries (its serials, its owners) and at most two inserts,
whatever its size, so that 100,000 rows take seconds rather than minutes. The caller owns
the transaction: it rolls everything back when a bad row means nothing may be written.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import Row

from devicecontrol.auth.clients import is_weak_secret
from devicecontrol.controllers import registry_repository
from devicecontrol.controllers.csvfile import NumberedRow
from devicecontrol.controllers.identity import claim_code_digest
from devicecontrol.controllers.spec import ControllerSpec, parse_spec
from devicecontrol.database.engine import Writer
from devicecontrol.devices.identity import device_secret_digest
from devicecontrol.errors import InvalidField
from devicecontrol.users.identity import username_key

# fields that must match for a registered serial to count as "already registered"; online
# and room_id are left out: they change in service (connectivity, the owner's rooms)
_COMPARED_FIELDS = ("mac", "type", "name", "firmware_version", "brand_id", "device_group")


@dataclass
class ImportReport:
    added: int = 0
    unchanged: int = 0
    added_without_secret: int = 0  # these devices cannot connect until rotate-secret
    added_with_short_secret: int = 0  # under RECOMMENDED_SECRET_LENGTH: worth a warning
    problems: list[tuple[int, str]] = field(default_factory=list)  # (line, what is wrong)

    def rolled_back(self) -> None:
        """Nothing was written after all: no row counts as added."""
        self.added = self.added_without_secret = self.added_with_short_secret = 0

    def problem_lines(self) -> list[str]:
        return [f"line {line}: {message}" for line, message in sorted(self.problems)]


def differences(existing: Row, spec: ControllerSpec, owner_id: int | None) -> list[str]:
    """The stated fields in which a row differs from the registered controller.

    A claim code, device secret or owner left empty is not stated, so it never differs: an
    export (which cannot hold claim codes or secrets) imported again into the same database
    changes nothing. A stated one that is not the stored one differs, even when none is
    stored: an import never sets a secret on a registered controller (rotate-secret does).
    """
    changed = [name for name in _COMPARED_FIELDS if getattr(existing, name) != getattr(spec, name)]
    if spec.owner is not None and existing.user_id != owner_id:
        changed.append("owner")
    if spec.claim_code is not None and not _same_digest(
        claim_code_digest(spec.serial_number, spec.claim_code), existing.claim_code_digest
    ):
        changed.append("claim_code")
    if spec.device_secret is not None and not _same_digest(
        device_secret_digest(spec.device_secret), existing.device_secret_digest
    ):
        changed.append("device_secret")
    return changed


def _same_digest(stated: str, stored: str | None) -> bool:
    return stored is not None and hmac.compare_digest(stated, stored)


class BatchImport:
    """Checks rows against the file so far and the database, and writes the good ones."""

    def __init__(
        self,
        connection: Writer,
        report: ImportReport,
        *,
        now: datetime,
        skip_invalid: bool,
    ) -> None:
        self.report = report
        self._connection = connection
        self._now = now
        self._skip_invalid = skip_invalid
        self._first_line_of: dict[str, int] = {}  # serial -> line that registered it
        self._accounts: dict[str, Row | None] = {}  # username key -> (id, active), or None

    @property
    def writing(self) -> bool:
        """False once a bad row means the transaction will be rolled back anyway."""
        return self._skip_invalid or not self.report.problems

    async def add(self, rows: list[NumberedRow]) -> None:
        specs = self._parse(rows)
        await self._load_accounts(spec.owner for _, spec in specs if spec.owner is not None)
        serials = [spec.serial_number for _, spec in specs]
        existing = await registry_repository.controllers_by_serial(self._connection, serials)
        new: list[ControllerSpec] = []
        for line, spec in specs:
            problem = self._problem(spec, existing.get(spec.serial_number))
            if problem is not None:
                self.report.problems.append((line, problem))
            elif spec.serial_number in existing:
                self.report.unchanged += 1
            else:
                new.append(spec)
        if self.writing:
            await self._register(new)

    def _parse(self, rows: list[NumberedRow]) -> list[tuple[int, ControllerSpec]]:
        specs: list[tuple[int, ControllerSpec]] = []
        for line, row in rows:
            extra = row.pop(None, None)
            if extra is not None:
                self.report.problems.append(
                    (line, f"{len(extra)} more field(s) than the header has")
                )
                continue
            try:
                spec = parse_spec(row)  # type: ignore[arg-type]  # None key removed above
            except InvalidField as exc:
                self.report.problems.append((line, exc.detail))
                continue
            first = self._first_line_of.setdefault(spec.serial_number, line)
            if first != line:
                self.report.problems.append(
                    (line, f"serial_number {spec.serial_number} repeats line {first}")
                )
                continue
            specs.append((line, spec))
        return specs

    async def _load_accounts(self, emails: Iterable[str]) -> None:
        keys = sorted({username_key(e) for e in emails} - self._accounts.keys())
        if keys:
            found = await registry_repository.accounts_by_key(self._connection, keys)
            self._accounts.update({key: found.get(key) for key in keys})

    def _owner(self, spec: ControllerSpec) -> Row | None:
        return self._accounts.get(username_key(spec.owner)) if spec.owner else None

    def _problem(self, spec: ControllerSpec, existing: Row | None) -> str | None:
        owner = self._owner(spec)
        # a disabled owner may stand in a rerun that changes nothing, never in a new row
        if spec.owner and (owner is None or (existing is None and not owner.active)):
            return f"owner: no active account is named {spec.owner}"
        if existing is None:
            return None
        changed = differences(existing, spec, owner.id if owner else None)
        if not changed:
            return None
        return (
            f"serial_number {spec.serial_number} is registered with other values "
            f"({', '.join(changed)}); a re-import never changes a registered controller"
        )

    async def _register(self, specs: list[ControllerSpec]) -> None:
        rows = []
        for spec in specs:
            owner = self._owner(spec)
            rows.append(spec.row_values(owner.id if owner else None, self._now))
        await registry_repository.insert_controllers(self._connection, rows)
        owned = [spec.serial_number for spec in specs if spec.owner]
        if owned:
            await registry_repository.insert_owners_records(self._connection, owned, self._now)
        self.report.added += len(specs)
        self.report.added_without_secret += sum(spec.device_secret is None for spec in specs)
        self.report.added_with_short_secret += sum(
            spec.device_secret is not None and is_weak_secret(spec.device_secret) for spec in specs
        )
