"""EMQX's HTTP authenticator and authorizer, in its JSON formats (the bodies EMQX is set to
send are in docs/OPERATIONS.md): 200 ``{"result": "allow"}`` or ``{"result": "deny"}``."""

from __future__ import annotations

from typing import Literal

import msgspec
from litestar import post
from litestar.di import NamedDependency
from litestar.params import JSONBody

from devicecontrol.devices.hook import rules
from devicecontrol.runtime import Runtime

Result = Literal["allow", "deny"]


class Authentication(msgspec.Struct, forbid_unknown_fields=False):
    username: str = ""
    password: str = ""
    clientid: str | None = None
    peerhost: str | None = None


class Authorization(msgspec.Struct, forbid_unknown_fields=False):
    topic: str
    action: str
    username: str = ""
    clientid: str | None = None


class Answer(msgspec.Struct):
    result: Result


def _answer(allowed: bool) -> Answer:
    return Answer("allow" if allowed else "deny")


@post("/mqtt/authenticate", status_code=200, include_in_schema=False)
async def authenticate(data: JSONBody[Authentication], runtime: NamedDependency[Runtime]) -> Answer:
    allowed = await rules.may_connect(
        runtime,
        client_id=data.clientid,
        username=data.username,
        password=data.password,
        address=data.peerhost or None,
    )
    return _answer(allowed)


@post("/mqtt/authorize", status_code=200, include_in_schema=False)
async def authorize(data: JSONBody[Authorization], runtime: NamedDependency[Runtime]) -> Answer:
    settings = runtime.settings
    if data.action == "publish":
        return _answer(rules.may_publish(settings, data.username, data.topic, data.clientid))
    if data.action == "subscribe":
        return _answer(rules.may_subscribe(settings, data.username, data.topic, data.clientid))
    return _answer(False)


EMQX_HANDLERS = [authenticate, authorize]
