"""The AsyncAPI 3.0 document of the device topics: the MQTT counterpart of /openapi.json.

Built from the same constants the link enforces (the catalogue, the payload limit, the
topic names), so that the document cannot drift from what the service accepts and sends;
a test checks it against real messages. Served at ``/asyncapi.json`` without a token.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from litestar import MediaType, Response, get

from devicecontrol import __version__
from devicecontrol.devices.catalogue import CATALOGUE, IntegerRange, OneOf, Parameter
from devicecontrol.devices.readings.service import MAX_PAYLOAD_BYTES

TIMESTAMP = {"type": "string", "pattern": r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$"}
SERIAL = {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$"}


def _parameter_schema(rule: Parameter) -> dict[str, Any]:
    if isinstance(rule, IntegerRange):
        return {"type": "integer", "minimum": rule.low, "maximum": rule.high}
    assert isinstance(rule, OneOf)
    return {"type": "string", "enum": list(rule.words)}


def _command_variants() -> list[dict[str, Any]]:
    """One schema per (type, command) of the catalogue, plus the open form of other types."""
    variants = []
    for device_type, commands in CATALOGUE.items():
        for name, parameters in commands.items():
            variants.append(
                {
                    "title": f"{device_type}: {name}",
                    "type": "object",
                    "properties": {
                        "name": {"const": name},
                        "params": {
                            "type": "object",
                            "properties": {
                                field: _parameter_schema(rule) for field, rule in parameters.items()
                            },
                            "required": list(parameters),
                            "additionalProperties": False,
                        },
                    },
                }
            )
    variants.append(
        {
            "title": "a type without a catalogue",
            "type": "object",
            "properties": {
                "name": {"type": "string", "pattern": "^[a-z][a-z0-9_]{0,63}$"},
                "params": {"type": "object"},
            },
        }
    )
    return variants


def _messages() -> dict[str, Any]:
    return {
        "reading": {
            "name": "reading",
            "title": "A reading (device to service)",
            "summary": f"A JSON object of what the device measures, at most {MAX_PAYLOAD_BYTES}"
            " bytes; anything else is dropped and counted.",
            "contentType": "application/json",
            "payload": {
                "type": "object",
                "examples": [
                    {
                        "temp": 21.5,
                        "humidity": 40.2,
                        "raw_temperature": 21500,
                        "raw_humidity": 40200,
                    },
                    {"relay_state": "on", "power": [12.5]},
                ],
            },
        },
        "command": {
            "name": "command",
            "title": "A command (service to device, QoS 1, at least once)",
            "contentType": "application/json",
            "payload": {
                "type": "object",
                "required": ["id", "name", "params", "expires_at"],
                "properties": {
                    "id": {"type": "string", "description": "Treat an id seen before as done."},
                    "name": {"type": "string"},
                    "params": {"type": "object"},
                    "expires_at": {**TIMESTAMP, "description": "UTC; do not act after it."},
                },
                # a catalogued command matches its own variant (and the open form)
                "anyOf": _command_variants(),
            },
        },
        "result": {
            "name": "result",
            "title": "How a command ended (device to service)",
            "contentType": "application/json",
            "payload": {
                "type": "object",
                "required": ["id", "status"],
                "properties": {
                    "id": {"type": "string"},
                    "status": {"enum": ["succeeded", "failed"]},
                    "result": {"type": "object"},
                    "error": {"type": "string", "maxLength": 500},
                },
            },
        },
    }


@cache
def asyncapi_document() -> dict[str, Any]:
    """The whole document (built once)."""
    serial_parameter = {"sn": {"description": "The device's serial number.", **SERIAL}}
    channels = {
        "state": ("devices/{sn}/state", "reading"),
        "commands": ("devices/{sn}/commands", "command"),
        "result": ("devices/{sn}/commands/result", "result"),
    }
    return {
        "asyncapi": "3.0.0",
        "info": {
            "title": "devicecontrol device link",
            "version": __version__,
            "description": (
                "MQTT 3.1.1. A device connects with client id = username = its serial "
                "number and password = its device secret, and may publish only to its own "
                "state and commands/result topics and subscribe only to its own commands "
                "topic. docs/DEVICES.md is the firmware author's guide."
            ),
        },
        "servers": {
            "embedded": {
                "host": "127.0.0.1:1884",
                "protocol": "mqtt",
                "protocolVersion": "3.1.1",
                "description": "devicecontrol serve's broker (DEVICECONTROL_MQTT_LISTEN).",
            }
        },
        "channels": {
            key: {
                "address": address,
                "parameters": {"sn": {"description": serial_parameter["sn"]["description"]}},
                "messages": {message: {"$ref": f"#/components/messages/{message}"}},
            }
            for key, (address, message) in channels.items()
        },
        "operations": {
            "reportReading": {"action": "receive", "channel": {"$ref": "#/channels/state"}},
            "sendCommand": {
                "action": "send",
                "channel": {"$ref": "#/channels/commands"},
                "bindings": {"mqtt": {"qos": 1}},
            },
            "reportResult": {"action": "receive", "channel": {"$ref": "#/channels/result"}},
        },
        "components": {"messages": _messages()},
    }


@get(
    "/asyncapi.json", include_in_schema=False, opt={"exclude_from_auth": True}, sync_to_thread=False
)
def asyncapi_json() -> Response[dict[str, Any]]:
    """The device topics' document, beside /openapi.json."""
    return Response(asyncapi_document(), media_type=MediaType.JSON)
