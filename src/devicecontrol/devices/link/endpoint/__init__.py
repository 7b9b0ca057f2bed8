"""The device endpoint adapter: our own MQTT 3.1.1 server for devices, on amqtt's codec."""
