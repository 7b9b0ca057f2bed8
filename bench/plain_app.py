"""A comparison server: the controller reads as a plain ASGI app on stdlib ``sqlite3``.

What the service's reads would cost with no framework and no query builder: the same
indexed look-ups (token digest -> live access token of an active user; the caller's
controller with its active assignment record and the latest reading of it; a melissa's
last ``send_ir_code`` for its ``command_log``), run with ``sqlite3`` on the event loop's
thread, answered with the same bytes and headers, encoded by msgspec. No token cache:
every request makes the look-ups. It answers ``GET /v1/controllers/{sn}`` and
``GET /v1/controllers?page=N&page_size=M`` (no filters); anything else is a bare 404.

SQLite only. ``BENCH_PLAIN_DATABASE`` names the database file; uvicorn loads this file
with ``--app-dir bench --factory``, like the ceiling. It never imports devicecontrol.
"""

from __future__ import annotations

import hashlib
import math
import os
import random
import re
import sqlite3
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl, urlencode

import msgspec

DATABASE_VARIABLE = "BENCH_PLAIN_DATABASE"
PREFIX = "/v1/controllers"
DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE = 100, 500  # the service's defaults
TOKEN_LENGTH = 40
SERIAL_NUMBER = re.compile(r"[A-Za-z0-9_-]{1,64}")
DIGITS = re.compile(r"[0-9]{1,18}")
MELISSA, SEND_IR_CODE = "melissa", "send_ir_code"
NO_SETTINGS_YET = {"state": 0, "mode": 0, "temp": 20, "fan": 0}
HAL_JSON = b"application/hal+json"
PROBLEM_JSON = b"application/problem+json"

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
App = Callable[[dict[str, Any], Receive, Send], Awaitable[None]]

# the statements the service's prebuilt SQLAlchemy ones compile to, written out
CALLER_SQL = """
SELECT access_tokens.user_id FROM access_tokens JOIN users ON users.id = access_tokens.user_id
WHERE access_tokens.digest = ? AND access_tokens.revoked_at IS NULL
  AND access_tokens.expires_at > ? AND users.disabled_at IS NULL
"""
OWNED = """
SELECT c.user_id, c.serial_number, c.mac, c.firmware_version, c.name, c.type, c.room_id,
       c.online, c.brand_id, c.id, a.id, r.payload, r.created_at
FROM controllers AS c
LEFT OUTER JOIN controller_assignments AS a ON a.controller_id = c.id AND a.deleted_at IS NULL
LEFT OUTER JOIN latest_readings AS r ON r.controller_id = c.id AND r.assignment_id = a.id
WHERE c.serial_number = ? AND c.user_id = ?
"""
# the same columns, then the total of the user's controllers (one statement, as the service)
PAGE = """
SELECT c.user_id, c.serial_number, c.mac, c.firmware_version, c.name, c.type, c.room_id,
       c.online, c.brand_id, c.id, a.id, r.payload, r.created_at,
       (SELECT count(*) FROM controllers WHERE user_id = ?)
FROM controllers AS c
LEFT OUTER JOIN controller_assignments AS a ON a.controller_id = c.id AND a.deleted_at IS NULL
LEFT OUTER JOIN latest_readings AS r ON r.controller_id = c.id AND r.assignment_id = a.id
WHERE c.user_id = ? ORDER BY c.id LIMIT ? OFFSET ?
"""
COUNT = "SELECT count(*) FROM controllers WHERE user_id = ?"
LAST_IR_CODE = """
SELECT params FROM commands
WHERE controller_id = ? AND assignment_id = ? AND name = ? ORDER BY id DESC LIMIT 1
"""


class Link(msgspec.Struct, omit_defaults=True):
    href: str


class SelfLinks(msgspec.Struct):
    self: Link


class PageLinks(msgspec.Struct, omit_defaults=True):
    self: Link
    first: Link
    last: Link
    prev: Link | None = None
    next: Link | None = None


class ControllerBody(msgspec.Struct):
    user_id: int | None
    serial_number: str
    mac: str
    firmware_version: str
    name: str
    type: str
    room_id: int | None
    online: bool
    brand_id: int
    controller_log: Any
    links: SelfLinks = msgspec.field(name="_links")


class Relation(msgspec.Struct):
    command_log: dict[str, Any] | None


class ControllerDetail(ControllerBody):
    relation: Relation = msgspec.field(name="_relation")


class ControllerResponse(msgspec.Struct):
    controller: ControllerDetail
    links: SelfLinks = msgspec.field(name="_links")


class Embedded(msgspec.Struct):
    controller: list[ControllerBody]


class ControllerPage(msgspec.Struct):
    embedded: Embedded = msgspec.field(name="_embedded")
    total: int
    page: int
    page_size: int
    page_count: int
    links: PageLinks = msgspec.field(name="_links")


encode = msgspec.json.encode
decode = msgspec.json.decode


def connect(path: str) -> sqlite3.Connection:
    """A read-only-by-pragma connection set up as the service's loop-thread readers are."""
    connection = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    for pragma in ("query_only=ON", "busy_timeout=250", f"mmap_size={256 * 1024 * 1024}"):
        connection.execute(f"PRAGMA {pragma}")
    return connection


class Clock:
    """Naive UTC at second precision as SQLAlchemy stores a DateTime in SQLite, formatted
    once per second (strftime would cost more than the token look-up)."""

    def __init__(self) -> None:
        self.second, self.text = 0, ""

    def now(self) -> str:
        second = int(time.time())
        if second != self.second:
            self.second = second
            moment = datetime.fromtimestamp(second, UTC)
            self.text = moment.strftime("%Y-%m-%d %H:%M:%S.000000")
        return self.text


def self_links(serial_number: str) -> SelfLinks:
    return SelfLinks(Link(f"{PREFIX}/{serial_number}"))


def controller_log(payload: str | None, created_at: str | None) -> Any:
    """The latest reading of the current ownership plus ``created``, else ``[]``."""
    if payload is None or created_at is None:
        return []
    return {**decode(payload), "created": created_at[:19]}


def body(row: tuple[Any, ...]) -> dict[str, Any]:
    """The fields every controller body shares, from one ``OWNED`` or ``PAGE`` row."""
    return {
        "user_id": row[0],
        "serial_number": row[1],
        "mac": row[2],
        "firmware_version": row[3],
        "name": row[4],
        "type": row[5],
        "room_id": row[6],
        "online": bool(row[7]),
        "brand_id": row[8],
        "controller_log": controller_log(row[11], row[12]),
        "links": self_links(row[1]),
    }


def header(scope: dict[str, Any], name: bytes) -> bytes | None:
    values = [value for key, value in scope["headers"] if key == name]
    return b", ".join(values) if values else None


class Reads:
    """The look-ups, on one connection of this worker process."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self.db = connection.cursor()
        self.clock = Clock()

    def caller(self, authorization: bytes | None) -> int | None:
        """The user id behind ``Authorization: Bearer <token>``, or None."""
        scheme, _, credential = (authorization or b"").decode("latin-1").strip().partition(" ")
        credential = credential.strip()
        if scheme.lower() != "bearer" or len(credential) != TOKEN_LENGTH:
            return None
        digest = hashlib.sha256(credential.encode("utf-8", "surrogatepass")).hexdigest()
        row = self.db.execute(CALLER_SQL, (digest, self.clock.now())).fetchone()
        return None if row is None else row[0]

    def command_log(self, row: tuple[Any, ...]) -> dict[str, Any] | None:
        if row[5] != MELISSA:
            return None
        last = None
        if row[10] is not None:
            last = self.db.execute(LAST_IR_CODE, (row[9], row[10], SEND_IR_CODE)).fetchone()
        if last is None:
            return dict(NO_SETTINGS_YET)
        params = decode(last[0])
        return {name: params.get(name, default) for name, default in NO_SETTINGS_YET.items()}

    def controller(self, user_id: int, serial_number: str) -> bytes | None:
        if not SERIAL_NUMBER.fullmatch(serial_number):
            return None
        row = self.db.execute(OWNED, (serial_number, user_id)).fetchone()
        if row is None:
            return None
        detail = ControllerDetail(**body(row), relation=Relation(self.command_log(row)))
        return encode(ControllerResponse(detail, self_links(serial_number)))

    def page(self, user_id: int, page: int, size: int) -> bytes:
        rows = self.db.execute(PAGE, (user_id, user_id, size, (page - 1) * size)).fetchall()
        total = rows[0][13] if rows else self.db.execute(COUNT, (user_id,)).fetchone()[0]
        page_count = max(1, math.ceil(total / size))
        query = {} if size == DEFAULT_PAGE_SIZE else {"page_size": size}

        def at(number: int) -> Link:
            return Link(f"{PREFIX}?" + urlencode({"page": number, **query}))

        links = PageLinks(
            self=at(page),
            first=at(1),
            last=at(page_count),
            prev=at(page - 1) if 1 < page <= page_count else None,
            next=at(page + 1) if page < page_count else None,
        )
        items = [ControllerBody(**body(row)) for row in rows]
        return encode(ControllerPage(Embedded(items), total, page, size, page_count, links))


def paging(query_string: bytes) -> tuple[int, int] | None:
    """``page`` and ``page_size`` as the service accepts them (digits only), else None."""
    fields = dict(parse_qsl(query_string.decode("latin-1")))
    page, size = fields.get("page", "1"), fields.get("page_size", str(DEFAULT_PAGE_SIZE))
    if not (DIGITS.fullmatch(page) and DIGITS.fullmatch(size)):
        return None
    if int(page) < 1 or not 1 <= int(size) <= MAX_PAGE_SIZE:
        return None
    return int(page), int(size)


def problem(status: int, title: str) -> tuple[int, bytes, bytes]:
    return status, PROBLEM_JSON, encode({"status": status, "title": title})


def answer(reads: Reads, scope: dict[str, Any]) -> tuple[int, bytes, bytes]:
    """Status, content type and body for one request."""
    path: str = scope["path"]
    if scope["method"] != "GET" or not path.startswith(PREFIX):
        return problem(404, "Not Found")
    user_id = reads.caller(header(scope, b"authorization"))
    if user_id is None:
        return problem(401, "Unauthorized")
    if path == PREFIX:
        requested = paging(scope["query_string"])
        if requested is None:
            return problem(400, "Bad Request")
        return 200, HAL_JSON, reads.page(user_id, *requested)
    if path.startswith(PREFIX + "/") and "/" not in path[len(PREFIX) + 1 :]:
        found = reads.controller(user_id, path[len(PREFIX) + 1 :])
        if found is not None:
            return 200, HAL_JSON, found
    return problem(404, "Not Found")


def create_app() -> App:
    reads = Reads(connect(os.environ[DATABASE_VARIABLE]))

    async def app(scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return  # lifespan: nothing to set up
        while (await receive()).get("more_body"):
            pass
        status, content_type, content = answer(reads, scope)
        headers = [
            (b"content-type", content_type),
            (b"x-request-id", f"{random.getrandbits(128):032x}".encode()),
            (b"content-length", str(len(content)).encode()),
        ]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": content})

    return app
