"""A comparison server: the controller reads written the usual FastAPI + SQLAlchemy way.

SQLAlchemy 2 async ORM models of the service's tables (declared here, not imported), a
session per request from ``Depends(get_session)``, ``Depends(current_user)`` finding the
caller through its access token with the ORM, pydantic response models, on aiosqlite or
asyncpg with the engines' default pools. No token cache. It answers
``GET /v1/controllers/{sn}`` and ``GET /v1/controllers?page=N&page_size=M`` with the bytes
the service sends (errors are FastAPI's own, not the service's problem documents).

``BENCH_FASTAPI_DATABASE_URL`` is the database URL as the service takes it
(``sqlite:///...`` or ``postgresql://...``); uvicorn loads this file with
``--app-dir bench --factory``. Needs the ``bench`` extra (``pip install -e '.[bench]'``).
It never imports devicecontrol.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import Depends, FastAPI, HTTPException, Query
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import (
    BigInteger,
    Boolean,
    DateTime,
    ForeignKey,
    Integer,
    Select,
    String,
    Text,
    and_,
    func,
    select,
)
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker, create_async_engine
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from starlette.types import ASGIApp, Message, Receive, Scope, Send

DATABASE_VARIABLE = "BENCH_FASTAPI_DATABASE_URL"
DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE = 100, 500  # the service's defaults
MELISSA, SEND_IR_CODE = "melissa", "send_ir_code"
NO_SETTINGS_YET = {"state": 0, "mode": 0, "temp": 20, "fan": 0}
RowId = BigInteger().with_variant(Integer, "sqlite")


# --- models --------------------------------------------------------------------------------


class Base(DeclarativeBase):
    pass


class User(Base):
    __tablename__ = "users"
    id: Mapped[int] = mapped_column(primary_key=True)
    username: Mapped[str] = mapped_column(String(254))
    username_key: Mapped[str] = mapped_column(String(254), unique=True)
    password_hash: Mapped[str] = mapped_column(String(255))
    firstname: Mapped[str] = mapped_column(String(100))
    lastname: Mapped[str] = mapped_column(String(100))
    phone: Mapped[str | None] = mapped_column(String(32))
    country_id: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(DateTime)
    disabled_at: Mapped[datetime | None] = mapped_column(DateTime)


class AccessToken(Base):
    __tablename__ = "access_tokens"
    id: Mapped[int] = mapped_column(primary_key=True)
    digest: Mapped[str] = mapped_column(String(64), unique=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"))
    client_pk: Mapped[int] = mapped_column(Integer)
    refresh_token_id: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(DateTime)
    expires_at: Mapped[datetime] = mapped_column(DateTime)
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime)


class Controller(Base):
    __tablename__ = "controllers"
    id: Mapped[int] = mapped_column(primary_key=True)
    serial_number: Mapped[str] = mapped_column(String(64), unique=True)
    mac: Mapped[str] = mapped_column(String(16))
    type: Mapped[str] = mapped_column(String(64))
    name: Mapped[str] = mapped_column(String(200))
    firmware_version: Mapped[str] = mapped_column(String(64))
    brand_id: Mapped[int] = mapped_column(Integer)
    device_group: Mapped[str] = mapped_column(String(64))
    room_id: Mapped[int | None] = mapped_column(Integer)
    online: Mapped[bool] = mapped_column(Boolean)
    claim_code_digest: Mapped[str | None] = mapped_column(String(64))
    user_id: Mapped[int | None] = mapped_column(ForeignKey("users.id"))
    created_at: Mapped[datetime] = mapped_column(DateTime)
    device_secret_digest: Mapped[str | None] = mapped_column(String(64))
    last_seen: Mapped[datetime | None] = mapped_column(DateTime)


class ControllerAssignment(Base):
    __tablename__ = "controller_assignments"
    id: Mapped[int] = mapped_column(primary_key=True)
    controller_id: Mapped[int] = mapped_column(ForeignKey("controllers.id"))
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"))
    serial_number: Mapped[str] = mapped_column(String(64))
    mac: Mapped[str] = mapped_column(String(16))
    firmware_version: Mapped[str] = mapped_column(String(64))
    name: Mapped[str] = mapped_column(String(200))
    type: Mapped[str] = mapped_column(String(64))
    device_group: Mapped[str] = mapped_column(String(64))
    status_push: Mapped[int] = mapped_column(Integer)
    room_id: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(DateTime)
    assigned_at: Mapped[datetime] = mapped_column(DateTime)
    deleted_at: Mapped[datetime | None] = mapped_column(DateTime)


class LatestReading(Base):
    __tablename__ = "latest_readings"
    controller_id: Mapped[int] = mapped_column(ForeignKey("controllers.id"), primary_key=True)
    reading_id: Mapped[int] = mapped_column(RowId)
    assignment_id: Mapped[int | None] = mapped_column(ForeignKey("controller_assignments.id"))
    payload: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime)


class Command(Base):
    __tablename__ = "commands"
    id: Mapped[int] = mapped_column(RowId, primary_key=True)
    public_id: Mapped[str] = mapped_column(String(32), unique=True)
    controller_id: Mapped[int] = mapped_column(ForeignKey("controllers.id"))
    assignment_id: Mapped[int | None] = mapped_column(ForeignKey("controller_assignments.id"))
    name: Mapped[str] = mapped_column(String(64))
    params: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(DateTime)
    sent_at: Mapped[datetime | None] = mapped_column(DateTime)
    completed_at: Mapped[datetime | None] = mapped_column(DateTime)
    expires_at: Mapped[datetime] = mapped_column(DateTime)
    result: Mapped[str | None] = mapped_column(Text)
    error: Mapped[str | None] = mapped_column(String(500))


# --- response models -----------------------------------------------------------------------


class Link(BaseModel):
    href: str


class SelfLinks(BaseModel):
    self: Link


class ControllerOut(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    user_id: int | None
    serial_number: str
    mac: str
    firmware_version: str
    name: str
    type: str
    room_id: int | None
    online: bool
    brand_id: int
    controller_log: dict[str, Any] | list[Any]
    links: SelfLinks = Field(alias="_links")


class CommandLog(BaseModel):
    state: int
    mode: int
    temp: int
    fan: int


class Relation(BaseModel):
    command_log: CommandLog | None


class ControllerDetailOut(ControllerOut):
    relation: Relation = Field(alias="_relation")


class ControllerResponse(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    controller: ControllerDetailOut
    links: SelfLinks = Field(alias="_links")


class Embedded(BaseModel):
    controller: list[ControllerOut]


class ControllerPage(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    embedded: Embedded = Field(alias="_embedded")
    total: int
    page: int
    page_size: int
    page_count: int
    links: dict[str, Link] = Field(alias="_links")  # self, first, last, and prev/next if any


class HalJSONResponse(JSONResponse):
    media_type = "application/hal+json"


# --- the app -------------------------------------------------------------------------------


def async_url(url: str) -> str:
    """The service's URL with the async driver named, as SQLAlchemy wants it."""
    parsed = make_url(url)
    driver = "sqlite+aiosqlite" if parsed.get_backend_name() == "sqlite" else "postgresql+asyncpg"
    return parsed.set(drivername=driver).render_as_string(hide_password=False)


SessionLocal = async_sessionmaker(expire_on_commit=False)  # bound to the engine by create_app
bearer = HTTPBearer()


async def get_session() -> AsyncIterator[AsyncSession]:
    async with SessionLocal() as session:
        yield session


SessionDep = Annotated[AsyncSession, Depends(get_session)]


async def current_user(
    session: SessionDep,
    credentials: Annotated[HTTPAuthorizationCredentials, Depends(bearer)],
) -> User:
    """The active user holding this live access token, else 401."""
    digest = hashlib.sha256(credentials.credentials.encode()).hexdigest()
    now = datetime.now(UTC).replace(tzinfo=None, microsecond=0)
    user = await session.scalar(
        select(User)
        .join(AccessToken, AccessToken.user_id == User.id)
        .where(
            AccessToken.digest == digest,
            AccessToken.revoked_at.is_(None),
            AccessToken.expires_at > now,
            User.disabled_at.is_(None),
        )
    )
    if user is None:
        raise HTTPException(status_code=401, detail="Invalid token")
    return user


CurrentUser = Annotated[User, Depends(current_user)]


def with_latest_reading() -> Select[tuple[Controller, ControllerAssignment, LatestReading]]:
    """Controllers with their active assignment and that assignment's latest reading."""
    return (
        select(Controller, ControllerAssignment, LatestReading)
        .outerjoin(
            ControllerAssignment,
            and_(
                ControllerAssignment.controller_id == Controller.id,
                ControllerAssignment.deleted_at.is_(None),
            ),
        )
        .outerjoin(
            LatestReading,
            and_(
                LatestReading.controller_id == Controller.id,
                LatestReading.assignment_id == ControllerAssignment.id,
            ),
        )
    )


def controller_log(reading: LatestReading | None) -> dict[str, Any] | list[Any]:
    """The latest reading of the current ownership plus ``created``, else ``[]``."""
    if reading is None:
        return []
    return {**json.loads(reading.payload), "created": f"{reading.created_at:%Y-%m-%d %H:%M:%S}"}


def controller_fields(controller: Controller, reading: LatestReading | None) -> dict[str, Any]:
    return {
        "user_id": controller.user_id,
        "serial_number": controller.serial_number,
        "mac": controller.mac,
        "firmware_version": controller.firmware_version,
        "name": controller.name,
        "type": controller.type,
        "room_id": controller.room_id,
        "online": controller.online,
        "brand_id": controller.brand_id,
        "controller_log": controller_log(reading),
        "links": SelfLinks(self=Link(href=f"/v1/controllers/{controller.serial_number}")),
    }


async def command_log(
    session: AsyncSession, controller: Controller, assignment: ControllerAssignment | None
) -> CommandLog | None:
    """A melissa's settings from its owner's last ``send_ir_code``; None for other types."""
    if controller.type != MELISSA:
        return None
    last = None
    if assignment is not None:
        last = await session.scalar(
            select(Command)
            .where(
                Command.controller_id == controller.id,
                Command.assignment_id == assignment.id,
                Command.name == SEND_IR_CODE,
            )
            .order_by(Command.id.desc())
            .limit(1)
        )
    params = json.loads(last.params) if last is not None else {}
    return CommandLog(**{name: params.get(name, value) for name, value in NO_SETTINGS_YET.items()})


def page_link(page: int, page_size: int) -> Link:
    query: dict[str, int] = {"page": page}
    if page_size != DEFAULT_PAGE_SIZE:
        query["page_size"] = page_size
    return Link(href="/v1/controllers?" + urlencode(query))


def page_links(page: int, page_size: int, page_count: int) -> dict[str, Link]:
    links = {
        "self": page_link(page, page_size),
        "first": page_link(1, page_size),
        "last": page_link(page_count, page_size),
    }
    if 1 < page <= page_count:
        links["prev"] = page_link(page - 1, page_size)
    if page < page_count:
        links["next"] = page_link(page + 1, page_size)
    return links


async def read_controller(
    serial_number: str, user: CurrentUser, session: SessionDep
) -> ControllerResponse:
    result = await session.execute(
        with_latest_reading().where(
            Controller.serial_number == serial_number, Controller.user_id == user.id
        )
    )
    row = result.first()
    if row is None:
        raise HTTPException(status_code=404, detail="Controller not found")
    controller, assignment, reading = row
    detail = ControllerDetailOut(
        **controller_fields(controller, reading),
        relation=Relation(command_log=await command_log(session, controller, assignment)),
    )
    return ControllerResponse(controller=detail, links=detail.links)


async def list_controllers(
    user: CurrentUser,
    session: SessionDep,
    page: Annotated[int, Query(ge=1)] = 1,
    page_size: Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE)] = DEFAULT_PAGE_SIZE,
) -> ControllerPage:
    total = await session.scalar(
        select(func.count()).select_from(Controller).where(Controller.user_id == user.id)
    )
    result = await session.execute(
        with_latest_reading()
        .where(Controller.user_id == user.id)
        .order_by(Controller.id)
        .offset((page - 1) * page_size)
        .limit(page_size)
    )
    items = [ControllerOut(**controller_fields(c, r)) for c, _, r in result.all()]
    page_count = max(1, math.ceil((total or 0) / page_size))
    return ControllerPage(
        embedded=Embedded(controller=items),
        total=total or 0,
        page=page,
        page_size=page_size,
        page_count=page_count,
        links=page_links(page, page_size, page_count),
    )


class RequestId:
    """Adds ``X-Request-ID`` (new random 128 bits) to every answer, as the service does."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        header = (b"x-request-id", f"{random.getrandbits(128):032x}".encode())

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", ()), header]
            await send(message)

        await self.app(scope, receive, send_with_id)


def create_app() -> FastAPI:
    SessionLocal.configure(bind=create_async_engine(async_url(os.environ[DATABASE_VARIABLE])))
    app = FastAPI(default_response_class=HalJSONResponse)
    app.add_middleware(RequestId)
    app.get("/v1/controllers/{serial_number}", response_model=ControllerResponse)(read_controller)
    app.get("/v1/controllers", response_model=ControllerPage)(list_controllers)
    return app
