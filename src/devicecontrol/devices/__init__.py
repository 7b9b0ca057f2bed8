"""The device link (contract §9, §10): identity, readings, online, commands, the broker."""
