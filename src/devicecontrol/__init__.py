"""devicecontrol: the device-control cloud service (v1 API)."""

__version__ = "0.1.0"
