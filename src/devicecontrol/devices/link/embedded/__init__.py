"""The embedded broker adapter: amqtt, with our limits in front of it."""
