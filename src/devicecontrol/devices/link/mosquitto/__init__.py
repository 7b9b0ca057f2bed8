"""The external-broker adapter: a client of Mosquitto, and its device accounts."""
