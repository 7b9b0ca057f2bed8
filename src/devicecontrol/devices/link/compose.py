"""The device link's composition root: settings -> broker adapter -> link. The one place
that knows the adapters (``endpoint/``, the service's own; ``mosquitto/``, a client of
Mosquitto; ``rabbitmq/``, an AMQP client of RabbitMQ); everything else sees them through
``ports.py``. Each adapter is imported when chosen: the others' libraries (an AMQP
client, an MQTT client) cost a link's every start a tenth of a second for nothing.
"""

from __future__ import annotations

from devicecontrol.devices.link.core import DeviceLink
from devicecontrol.devices.link.ports import Broker
from devicecontrol.runtime import Runtime

__all__ = ["build_link"]


def build_link(runtime: Runtime, *, listen: str | None = None) -> DeviceLink:
    """The link with its broker: the device endpoint on ``listen`` (else the setting), or,
    when no ``listen`` is given and the settings name one, a client of RabbitMQ
    (``DEVICECONTROL_AMQP_URL``) or of Mosquitto (``DEVICECONTROL_MQTT_URL``)."""
    settings = runtime.settings
    mqtt_url, amqp_url = settings.mqtt_url, settings.amqp_url

    def make_broker(link: DeviceLink) -> Broker:
        if amqp_url is not None and listen is None:
            from devicecontrol.devices.link.rabbitmq.client import RabbitMQBroker
            from devicecontrol.devices.link.rabbitmq.management import ManagementApi

            management = settings.rabbitmq_management_url
            return RabbitMQBroker(
                link.reports,
                amqp_url,
                ca_file=settings.mqtt_ca,
                shard=settings.link_shard,
                management=(
                    ManagementApi(management, amqp_url, ca_file=settings.mqtt_ca)
                    if management
                    else None
                ),
            )
        if mqtt_url is not None and listen is None:
            from devicecontrol.devices.link.mosquitto.client import MosquittoBroker
            from devicecontrol.devices.link.mosquitto.share import MosquittoShare

            index, count = settings.link_shard
            if index > 0:
                return MosquittoShare(
                    link.reports, mqtt_url, shard=(index, count), ca_file=settings.mqtt_ca
                )
            return MosquittoBroker(link.reports, mqtt_url, ca_file=settings.mqtt_ca, shards=count)
        from devicecontrol.devices.link.endpoint.broker import DeviceEndpoint

        return DeviceEndpoint(link, listen or settings.mqtt_listen, settings)

    return DeviceLink(runtime, make_broker)
