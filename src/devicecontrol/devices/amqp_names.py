"""How RabbitMQ's MQTT plugin names the devices' topics and subscriptions, for the broker
hook's answers and the link's AMQP client alike.

An MQTT topic is a routing key on the ``amq.topic`` exchange, ``/`` and ``.`` swapped and
``+`` written ``*``; a device's subscription is a queue ``mqtt-subscription-<client
id>qos0`` or ``...qos1`` bound to that exchange. The link's own queues begin with
``devicecontrol.``; the event exchange plugin publishes connections and bindings made and
ended on ``amq.rabbitmq.event``.
"""

from __future__ import annotations

VHOST = "/"  # the MQTT plugin's default virtual host: the only one the hook allows
EXCHANGE = "amq.topic"
EVENTS = "amq.rabbitmq.event"
SUBSCRIPTION_PREFIX = "mqtt-subscription-"
SUBSCRIPTION_QOS = ("qos0", "qos1")
LINK_QUEUE_PREFIX = "devicecontrol."
_FROM_ROUTING_KEY = str.maketrans({".": "/", "/": ".", "*": "+"})
_TO_ROUTING_KEY = str.maketrans({"/": ".", ".": "/", "+": "*"})


def mqtt_topic(routing_key: str) -> str:
    """The MQTT topic (or filter) a routing key (or binding key) of the plugin stands for."""
    return routing_key.translate(_FROM_ROUTING_KEY)


def routing_key(topic: str) -> str:
    """The routing key of an MQTT topic (or filter)."""
    return topic.translate(_TO_ROUTING_KEY)


def subscription_queues(client_id: str) -> tuple[str, ...]:
    """The names a subscription queue of ``client_id`` may have (one per QoS), the one
    devices subscribe with (QoS 1) first."""
    return tuple(f"{SUBSCRIPTION_PREFIX}{client_id}{qos}" for qos in reversed(SUBSCRIPTION_QOS))


def subscription_queue_prefix(client_id: str) -> str:
    """What the name of every subscription queue of ``client_id`` begins with."""
    return f"{SUBSCRIPTION_PREFIX}{client_id}qos"


def subscriber(queue_name: str) -> str | None:
    """The client id whose subscription queue ``queue_name`` is, else None."""
    if not queue_name.startswith(SUBSCRIPTION_PREFIX):
        return None
    rest = queue_name[len(SUBSCRIPTION_PREFIX) :]
    for qos in SUBSCRIPTION_QOS:
        if rest.endswith(qos) and len(rest) > len(qos):
            return rest[: -len(qos)]
    return None
