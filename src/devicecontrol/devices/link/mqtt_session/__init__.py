"""The link's own kept MQTT session, on any MQTT 3.1.1 broker: a persistent session (fixed
client id, clean session off) whose messages are acknowledged only once the link settles
them, in the order they came, kept up with reconnects. No broker's name is in it: an
adapter of a broker the link reads over MQTT builds on it, with its own check of the
broker (``KeptConnection``'s ``check``).
"""
