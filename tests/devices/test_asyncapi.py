"""The AsyncAPI document says what the link really accepts and sends (contract §9)."""

from __future__ import annotations

import json
import random

import jsonschema
import pytest

from devicecontrol.devices import repository
from devicecontrol.devices.asyncapi import asyncapi_document
from devicecontrol.devices.catalogue import CATALOGUE
from devicecontrol.devices.commands import service as commands
from devicecontrol.devices.readings.service import MAX_PAYLOAD_BYTES, RejectedPayload, parse_object
from devicecontrol.devices.simulator import DeviceState, carry_out, reading_of
from tests.factories import make_controller, make_user

MESSAGES = asyncapi_document()["components"]["messages"]


def valid(message: str, payload: object) -> bool:
    return jsonschema.Draft202012Validator(MESSAGES[message]["payload"]).is_valid(payload)


def variant(name: str, device_type: str) -> dict:
    [found] = [
        v for v in MESSAGES["command"]["payload"]["anyOf"] if v["title"] == f"{device_type}: {name}"
    ]
    return found


def test_the_document_names_the_three_topics_and_mqtt():
    document = asyncapi_document()
    assert document["asyncapi"].startswith("3.")
    addresses = {channel["address"] for channel in document["channels"].values()}
    assert addresses == {
        "devices/{sn}/state",
        "devices/{sn}/commands",
        "devices/{sn}/commands/result",
    }
    assert document["servers"]["embedded"]["protocol"] == "mqtt"


@pytest.mark.parametrize("device_type", ["melissa", "smart_plug", "bobbie", "vicki", "other"])
def test_simulated_readings_are_valid_readings(device_type):
    reading = reading_of(device_type, DeviceState(), random.Random(3))
    assert valid("reading", reading)
    parse_object(repr(reading).replace("'", '"').encode())


@pytest.mark.parametrize(
    "payload", [b"[1, 2]", b'"text"', b"3", b"null", b"not json", b"{" + b" " * 5000 + b"}"]
)
def test_what_the_link_drops_is_not_a_valid_reading(payload):
    with pytest.raises(RejectedPayload):
        parse_object(payload)
    if payload.startswith((b"[", b'"', b"3", b"n")) and payload != b"not json":
        assert not valid("reading", json.loads(payload))


def test_a_reading_of_exactly_the_limit_is_taken_and_one_byte_more_is_not():
    padding = MAX_PAYLOAD_BYTES - len(b'{"p": ""}')
    at_limit = b'{"p": "' + b"x" * padding + b'"}'
    assert len(at_limit) == MAX_PAYLOAD_BYTES
    assert valid("reading", parse_object(at_limit))
    with pytest.raises(RejectedPayload, match="too_large"):
        parse_object(at_limit.replace(b'"}', b'x"}'))


async def test_delivered_commands_match_their_catalogue_variant(runtime):
    user_id = await make_user(runtime, "ana@example.com")
    await make_controller(runtime, "MEL-9", type="melissa", owner="ana@example.com")
    owned = await commands.owned_device(runtime, user_id, "MEL-9")
    created = await commands.create_command(
        runtime, owned, name="send_ir_code", ttl_s=60, strict=True,
        fields={"state": 1, "mode": 2, "temp": 24.0, "fan": 1},
    )  # fmt: skip
    payload = json.loads(commands.delivery_payload(created))
    assert valid("command", payload)
    schema = variant("send_ir_code", "melissa")
    jsonschema.validate(payload, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**payload, "params": {**payload["params"], "temp": 31}}, schema)


def test_every_catalogued_command_has_a_variant():
    titles = {v["title"] for v in MESSAGES["command"]["payload"]["anyOf"]}
    for device_type, names in CATALOGUE.items():
        for name in names:
            assert f"{device_type}: {name}" in titles


@pytest.mark.parametrize(
    ("result", "accepted"),
    [
        ({"id": "a", "status": "succeeded"}, True),
        ({"id": "a", "status": "failed", "error": "jammed", "result": {"x": 1}}, True),
        ({"id": "a", "status": "done"}, False),
        ({"id": "a", "status": "failed", "result": [1]}, False),
        ({"id": "a", "status": "failed", "error": 3}, False),
        ({"status": "failed"}, False),
    ],
)
async def test_the_result_schema_is_what_the_service_takes(runtime, result, accepted):
    await make_controller(runtime, "PLUG-9")
    async with runtime.database.read() as connection:
        device = await repository.find_device(connection, "PLUG-9")
    outcome = await commands.record_result(runtime, device.id, "PLUG-9", result)
    # a well-formed result of an unknown command is dropped for that reason, not as malformed
    assert (outcome.dropped != "malformed") is accepted
    assert valid("result", result) is accepted


def test_simulated_results_are_valid_results():
    state = DeviceState()
    ok = carry_out(
        "smart_plug", {"id": "1", "name": "switch_on_off", "params": {"state": "on"}}, state
    )
    failed = carry_out("smart_plug", {"id": "2", "name": "nope", "params": {}}, state)
    assert valid("result", ok) and valid("result", failed)


async def test_the_document_is_served_beside_openapi_without_a_token(client):
    response = await client.get("/asyncapi.json")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    assert response.json() == json.loads(json.dumps(asyncapi_document()))
