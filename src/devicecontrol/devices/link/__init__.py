"""The device link (contract §9): ports and adapters. ``ports.py`` is the map."""
