"""VerneMQ's webhooks (``vmq_webhooks``): its ``auth_on_register``, ``auth_on_subscribe`` and
``auth_on_publish`` questions and their MQTT 5 twins (the same members, plus ones read
here by none), answered 200 ``{"result": "ok"}`` or ``{"result": {"error": "not_allowed"}}``
from ``rules.py`` alone (contract §9, "Brokers that ask the service").

VerneMQ sends no header of its own choosing, so its endpoints carry the hook's token as
the first path segment (``app.py``). No answer carries ``cache-control``: VerneMQ caches
only answers that do, so a rotated secret is refused at the next question. Only the
default mountpoint ("") is the service's topic tree; a question from any other is refused,
as RabbitMQ's from a virtual host other than ``/`` are.
"""

from __future__ import annotations

from typing import Literal

import msgspec
from litestar import post
from litestar.di import NamedDependency
from litestar.params import JSONBody

from devicecontrol.devices.hook import rules
from devicecontrol.runtime import Runtime

PREFIX = "/vernemq/"


class Registration(msgspec.Struct, forbid_unknown_fields=False):
    """``auth_on_register(_m5)``; VerneMQ sends an absent username or password as null."""

    client_id: str
    username: str | None = None
    password: str | None = None
    peer_addr: str | None = None
    mountpoint: str = ""


class Publication(msgspec.Struct, forbid_unknown_fields=False):
    """``auth_on_publish(_m5)``; the payload, when sent, is not read."""

    client_id: str
    topic: str
    username: str | None = None
    mountpoint: str = ""


class TopicFilter(msgspec.Struct, forbid_unknown_fields=False):
    topic: str


class Subscription(msgspec.Struct, forbid_unknown_fields=False):
    """``auth_on_subscribe(_m5)``: every filter of one SUBSCRIBE."""

    client_id: str
    topics: list[TopicFilter]
    username: str | None = None
    mountpoint: str = ""


class Refusal(msgspec.Struct):
    error: Literal["not_allowed"] = "not_allowed"


class Answer(msgspec.Struct):
    result: Literal["ok"] | Refusal


ALLOWED = Answer("ok")
REFUSED = Answer(Refusal())


def _answer(allowed: bool) -> Answer:
    return ALLOWED if allowed else REFUSED


def _paths(hook: str) -> list[str]:
    return [PREFIX + hook, PREFIX + hook + "_m5"]


@post(_paths("auth_on_register"), status_code=200, include_in_schema=False)
async def auth_on_register(
    data: JSONBody[Registration], runtime: NamedDependency[Runtime]
) -> Answer:
    """A CONNECT, throttled per the device's address (``peer_addr``)."""
    if data.mountpoint:
        return REFUSED
    allowed = await rules.may_connect(
        runtime,
        client_id=data.client_id,
        username=data.username or "",
        password=data.password or "",
        address=data.peer_addr or None,
    )
    return _answer(allowed)


@post(_paths("auth_on_publish"), status_code=200, include_in_schema=False)
async def auth_on_publish(data: JSONBody[Publication], runtime: NamedDependency[Runtime]) -> Answer:
    username = data.username or ""
    allowed = rules.may_publish(runtime.settings, username, data.topic, data.client_id)
    return _answer(allowed and not data.mountpoint)


@post(_paths("auth_on_subscribe"), status_code=200, include_in_schema=False)
async def auth_on_subscribe(
    data: JSONBody[Subscription], runtime: NamedDependency[Runtime]
) -> Answer:
    """All the SUBSCRIBE's filters or none: a refusal is a failure code in the SUBACK for
    each of them, on every VerneMQ version (VerneMQ reads a per-filter refusal only since 2.2)."""
    username, settings = data.username or "", runtime.settings
    allowed = bool(data.topics) and all(
        rules.may_subscribe(settings, username, wanted.topic, data.client_id)
        for wanted in data.topics
    )
    return _answer(allowed and not data.mountpoint)


VERNEMQ_HANDLERS = [auth_on_register, auth_on_publish, auth_on_subscribe]
