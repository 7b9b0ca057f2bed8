"""The device link as an AMQP client of RabbitMQ (``client.py``)."""
