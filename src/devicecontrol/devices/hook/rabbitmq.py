"""RabbitMQ's HTTP auth backend (``rabbitmq_auth_backend_http``): its four questions, asked
as GET query strings or POST forms, answered ``allow`` or ``deny`` in plain text.

RabbitMQ's MQTT plugin turns a topic into a routing key on the ``amq.topic`` exchange,
``/`` into ``.`` (and ``.`` into ``/``) and ``+`` into ``*``; the answers undo that and ask
the topic rules (``rules.py``). Its subscriptions are queues named
``mqtt-subscription-<client id>qos0`` and ``...qos1``. The link's own queues begin with
``devicecontrol.``.
"""

from __future__ import annotations

from typing import Any

from litestar import Request, route
from litestar.di import NamedDependency
from litestar.enums import HttpMethod
from litestar.response import Response

from devicecontrol.controllers.identity import is_serial_number
from devicecontrol.devices.hook import rules
from devicecontrol.runtime import Runtime

VHOST = "/"  # the MQTT plugin's default virtual host: the only one the hook allows
EXCHANGE = "amq.topic"  # where the MQTT plugin publishes and binds
EVENTS = "amq.rabbitmq.event"  # the event exchange plugin's: connections made and closed
DEVICE_QUEUE = "mqtt-subscription-{client_id}qos"
LINK_QUEUES = ("devicecontrol.", "mqtt-subscription-devicecontrol")
_FROM_ROUTING_KEY = str.maketrans({".": "/", "/": ".", "*": "+"})
METHODS = [HttpMethod.GET, HttpMethod.POST]


def mqtt_topic(routing_key: str) -> str:
    """The MQTT topic (or filter) a routing key (or binding key) of the plugin stands for."""
    return routing_key.translate(_FROM_ROUTING_KEY)


async def _asked(request: Request[Any, Any, Any]) -> dict[str, str]:
    asked = {name: str(value) for name, value in request.query_params.items()}
    if request.method == HttpMethod.POST:
        asked.update({name: str(value) for name, value in (await request.form()).items()})
    return asked


def _answer(allowed: bool) -> Response[str]:
    return Response("allow" if allowed else "deny", media_type="text/plain", status_code=200)


@route("/rabbitmq/user", http_method=METHODS, include_in_schema=False)
async def user(request: Request[Any, Any, Any], runtime: NamedDependency[Runtime]) -> Response[str]:
    """A login. The backend names no client address here: a device's failures are not
    throttled on this path (``identity.authenticate_device``)."""
    asked = await _asked(request)
    username = asked.get("username", "")
    allowed = await rules.may_connect(
        runtime,
        # the MQTT plugin sends the client id; a login over AMQP has none to compare
        client_id=asked.get("client_id") or username,
        username=username,
        password=asked.get("password", ""),
        address=None,
    )
    return _answer(allowed)


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
            return _answer(name == EXCHANGE or (name == EVENTS and permission == "read"))
        return _answer(kind == "queue" and name.startswith(LINK_QUEUES))
    if not is_serial_number(username):
        return _answer(False)
    if kind == "exchange":
        return _answer(name == EXCHANGE and permission in ("read", "write"))
    return _answer(kind == "queue" and name.startswith(DEVICE_QUEUE.format(client_id=username)))


@route("/rabbitmq/topic", http_method=METHODS, include_in_schema=False)
async def topic(
    request: Request[Any, Any, Any], runtime: NamedDependency[Runtime]
) -> Response[str]:
    """A routing key on ``amq.topic``: written is a publication, read a subscription."""
    asked = await _asked(request)
    if asked.get("vhost") != VHOST or asked.get("name") != EXCHANGE:
        return _answer(False)
    username = asked.get("username", "")
    client_id = asked.get("client_id") or None  # in the variable map, where sent
    mqtt = mqtt_topic(asked.get("routing_key", ""))
    settings = runtime.settings
    if asked.get("permission") == "write":
        return _answer(rules.may_publish(settings, username, mqtt, client_id))
    if asked.get("permission") == "read":
        return _answer(rules.may_subscribe(settings, username, mqtt, client_id))
    return _answer(False)


RABBITMQ_HANDLERS = [user, vhost, resource, topic]
