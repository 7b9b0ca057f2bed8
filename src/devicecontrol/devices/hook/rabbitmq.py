"""RabbitMQ's HTTP auth backend (``rabbitmq_auth_backend_http``): its four questions, asked
as GET query strings or POST forms, answered ``allow`` or ``deny`` in plain text.

The plugin's names (``devices/amqp_names.py``) are turned back into MQTT topics for the
topic rules (``rules.py``).
"""

from __future__ import annotations

from typing import Any

from litestar import Request, route
from litestar.di import NamedDependency
from litestar.enums import HttpMethod
from litestar.response import Response

from devicecontrol.controllers.identity import is_serial_number
from devicecontrol.devices.amqp_names import (
    EVENTS,
    EXCHANGE,
    LINK_QUEUE_PREFIX,
    SUBSCRIPTION_PREFIX,
    VHOST,
    mqtt_topic,
    subscription_queue_prefix,
)
from devicecontrol.devices.hook import rules
from devicecontrol.runtime import Runtime

# the link's AMQP queues, and the subscription queues of its MQTT client ids (devicecontrol-...)
LINK_QUEUES = (LINK_QUEUE_PREFIX, SUBSCRIPTION_PREFIX + "devicecontrol")
METHODS = [HttpMethod.GET, HttpMethod.POST]


async def _asked(request: Request[Any, Any, Any]) -> dict[str, str]:
    asked = {name: str(value) for name, value in request.query_params.items()}
    if request.method == HttpMethod.POST:
        asked.update({name: str(value) for name, value in (await request.form()).items()})
    return asked


def _answer(allowed: bool, *tags: str) -> Response[str]:
    """``allow``, with the user's tags after it (``/user`` only), or ``deny``."""
    text = " ".join(("allow", *tags)) if allowed else "deny"
    return Response(text, media_type="text/plain", status_code=200)


@route("/rabbitmq/user", http_method=METHODS, include_in_schema=False)
async def user(request: Request[Any, Any, Any], runtime: NamedDependency[Runtime]) -> Response[str]:
    """A login. The backend names no client address here: a device's failures are not
    throttled on this path (``identity.authenticate_device``)."""
    asked = await _asked(request)
    username = asked.get("username", "")
    settings = runtime.settings
    allowed = await rules.may_connect(
        runtime,
        # the MQTT plugin sends the client id; a login over AMQP has none to compare
        client_id=asked.get("client_id") or username,
        username=username,
        password=asked.get("password", ""),
        address=None,
    )
    # the link closes a rotated secret's connection through the management API
    managing = settings.rabbitmq_management_url and rules.is_link(settings, username)
    return _answer(allowed, *(("administrator",) if managing else ()))


@route("/rabbitmq/vhost", http_method=METHODS, include_in_schema=False)
async def vhost(
    request: Request[Any, Any, Any], runtime: NamedDependency[Runtime]
) -> Response[str]:
    asked = await _asked(request)
    username = asked.get("username", "")
    known = rules.is_link(runtime.settings, username) or is_serial_number(username)
    return _answer(known and asked.get("vhost") == VHOST)


@route("/rabbitmq/resource", http_method=METHODS, include_in_schema=False)
async def resource(
    request: Request[Any, Any, Any], runtime: NamedDependency[Runtime]
) -> Response[str]:
    """Exchanges and queues: a device writes to and reads from ``amq.topic`` through its
    own subscription queues; the link also reads the event exchange and owns its queues."""
    asked = await _asked(request)
    username, kind, name = asked.get("username", ""), asked.get("resource"), asked.get("name", "")
    permission = asked.get("permission")
    if asked.get("vhost") != VHOST:
        return _answer(False)
    if rules.is_link(runtime.settings, username):
        if kind == "exchange":
            own = name.startswith(LINK_QUEUE_PREFIX)  # its shards' hash exchange
            return _answer(name == EXCHANGE or own or (name == EVENTS and permission == "read"))
        return _answer(kind == "queue" and name.startswith(LINK_QUEUES))
    if not is_serial_number(username):
        return _answer(False)
    if kind == "exchange":
        return _answer(name == EXCHANGE and permission in ("read", "write"))
    return _answer(kind == "queue" and name.startswith(subscription_queue_prefix(username)))


@route("/rabbitmq/topic", http_method=METHODS, include_in_schema=False)
async def topic(
    request: Request[Any, Any, Any], runtime: NamedDependency[Runtime]
) -> Response[str]:
    """A routing key on ``amq.topic``: written is a publication, read a subscription."""
    asked = await _asked(request)
    username = asked.get("username", "")
    if asked.get("vhost") != VHOST:
        return _answer(False)
    if asked.get("name") == EVENTS:  # a topic exchange too: the link binds to its events
        link = rules.is_link(runtime.settings, username)
        return _answer(link and asked.get("permission") == "read")
    if asked.get("name") != EXCHANGE:
        return _answer(False)
    client_id = asked.get("client_id") or None  # in the variable map, where sent
    mqtt = mqtt_topic(asked.get("routing_key", ""))
    settings = runtime.settings
    if asked.get("permission") == "write":
        return _answer(rules.may_publish(settings, username, mqtt, client_id))
    if asked.get("permission") == "read":
        return _answer(rules.may_subscribe(settings, username, mqtt, client_id))
    return _answer(False)


RABBITMQ_HANDLERS = [user, vhost, resource, topic]
