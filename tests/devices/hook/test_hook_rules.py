"""The broker hook's answers (contract §9, "Brokers that ask the service"), over HTTP to the
hook's own app, on both databases: only its broker is answered; a device is let in by the
same identity rules as on the embedded broker (digest, client id, throttle, rotation at
once); each may use its own topics only; the service's own account what the link needs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace

import httpx
import pytest

from devicecontrol.config import MqttUrl, Settings, ThrottleRule
from devicecontrol.devices.hook.app import create_hook_app
from devicecontrol.devices.identity import rotate_device_secret
from devicecontrol.runtime import Runtime
from tests.factories import make_controller

TOKEN = "hook-token-for-the-tests-0123456789abcdef"
BEARER = {"Authorization": f"Bearer {TOKEN}"}
SECRET, OTHER_SECRET = "plug-one-secret", "plug-two-secret"
LINK_USER, LINK_PASSWORD = "devicecontrol-link", "link-password-of-the-tests"


@pytest.fixture
async def hook(settings: Settings) -> AsyncIterator[tuple[Runtime, httpx.AsyncClient]]:
    settings = replace(
        settings,
        mqtt_url=MqttUrl(False, "127.0.0.1", 1883, LINK_USER, LINK_PASSWORD),
        throttle_device_per_serial=ThrottleRule(3, 60),
        throttle_device_per_address=ThrottleRule(6, 60),
    )
    runtime = Runtime.from_settings(settings)
    await make_controller(runtime, "PLUG-1", device_secret=SECRET)
    await make_controller(runtime, "PLUG-2", device_secret=OTHER_SECRET)
    transport = httpx.ASGITransport(app=create_hook_app(runtime, TOKEN))
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://hook") as http:
            yield runtime, http
    finally:
        await runtime.close()


async def emqx_connect(http: httpx.AsyncClient, username: str, password: str, **more) -> str:
    body = {"clientid": username, "username": username, "password": password, **more}
    answer = await http.post("/mqtt/authenticate", json=body, headers=BEARER)
    assert answer.status_code == 200, answer.text
    return answer.json()["result"]


async def emqx_may(http: httpx.AsyncClient, username: str, action: str, topic: str) -> str:
    body = {"clientid": username, "username": username, "action": action, "topic": topic}
    answer = await http.post("/mqtt/authorize", json=body, headers=BEARER)
    assert answer.status_code == 200, answer.text
    return answer.json()["result"]


async def rabbitmq(http: httpx.AsyncClient, question: str, **asked: str) -> str:
    """As RabbitMQ's HTTP backend asks: a POST form, the token as the path's first segment."""
    answer = await http.post(f"/{TOKEN}/rabbitmq/{question}", data=asked)
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/plain")
    return answer.text


async def test_only_the_broker_with_the_token_is_answered(hook):
    _, http = hook
    body = {"clientid": "PLUG-1", "username": "PLUG-1", "password": SECRET}
    refused = [
        await http.post("/mqtt/authenticate", json=body),
        await http.post("/mqtt/authenticate", json=body, headers={"Authorization": "Bearer x"}),
        await http.post("/mqtt/authenticate", json=body, headers={"Authorization": TOKEN}),
        await http.post(f"/{TOKEN[:-1]}/rabbitmq/user", data={"username": "PLUG-1"}),
        await http.post("/rabbitmq/user", data={"username": "PLUG-1", "password": SECRET}),
        await http.get(f"/rabbitmq/{TOKEN}/user"),  # the token is the first segment or none
    ]
    for answer in refused:
        assert answer.status_code == 401
        assert answer.headers["content-type"] == "application/problem+json"
        assert answer.headers["www-authenticate"] == "Bearer"
        assert TOKEN not in answer.text
    assert await emqx_connect(http, "PLUG-1", SECRET) == "allow"
    by_path = await http.post(f"/{TOKEN}/mqtt/authenticate", json=body)
    assert by_path.json() == {"result": "allow"}
    by_header = await http.post(
        "/rabbitmq/user", data={"username": "PLUG-1", "password": SECRET}, headers=BEARER
    )
    assert by_header.text == "allow"
    assert (await http.post(f"/{TOKEN}/nowhere", json={})).status_code == 404
    # what a broker should never send, answered in words, never a 500
    for body in (b"{", b"[1, 2]", b'{"topic": 5, "action": "publish"}', b"{" * 10_000):
        bad = await http.post(
            "/mqtt/authorize", content=body, headers={**BEARER, "Content-Type": "application/json"}
        )
        assert bad.status_code == 400, (body[:20], bad.status_code, bad.text)


async def test_a_device_connects_with_its_secret_and_its_serial_as_client_id(hook):
    _, http = hook
    assert await emqx_connect(http, "PLUG-1", SECRET) == "allow"
    assert await emqx_connect(http, "PLUG-1", OTHER_SECRET) == "deny"  # another's secret
    assert await emqx_connect(http, "PLUG-1", "") == "deny"
    assert await emqx_connect(http, "PLUG-9", SECRET) == "deny"  # no such controller
    assert await emqx_connect(http, "PLUG-1", SECRET, clientid="PLUG-2") == "deny"
    assert await emqx_connect(http, "not a serial", SECRET) == "deny"
    assert await rabbitmq(http, "user", username="PLUG-2", password=OTHER_SECRET) == "allow"
    assert (
        await rabbitmq(http, "user", username="PLUG-2", password=OTHER_SECRET, client_id="PLUG-2")
        == "allow"
    )
    assert (
        await rabbitmq(http, "user", username="PLUG-2", password=OTHER_SECRET, client_id="x")
        == "deny"
    )
    assert await rabbitmq(http, "user", username="PLUG-2", password=SECRET) == "deny"
    get = await http.get(
        f"/{TOKEN}/rabbitmq/user", params={"username": "PLUG-2", "password": OTHER_SECRET}
    )
    assert get.text == "allow"  # RabbitMQ's default method: the query string


async def test_a_rotated_secret_is_refused_at_the_next_question(hook):
    runtime, http = hook
    assert await emqx_connect(http, "PLUG-1", SECRET) == "allow"
    new_secret = await rotate_device_secret(runtime, "PLUG-1")
    assert await emqx_connect(http, "PLUG-1", SECRET) == "deny"
    assert await rabbitmq(http, "user", username="PLUG-1", password=SECRET) == "deny"
    assert await emqx_connect(http, "PLUG-1", new_secret) == "allow"
    assert await rabbitmq(http, "user", username="PLUG-1", password=new_secret) == "allow"


async def test_failures_are_throttled_per_address_and_never_keep_a_device_out_from_elsewhere(
    hook,
):
    _, http = hook
    attacker, device = "203.0.113.9", "198.51.100.7"
    for _ in range(3):
        assert await emqx_connect(http, "PLUG-1", "guess", peerhost=attacker) == "deny"
    # throttled from there: even the right secret, the same answer
    assert await emqx_connect(http, "PLUG-1", SECRET, peerhost=attacker) == "deny"
    assert await emqx_connect(http, "PLUG-1", SECRET, peerhost=device) == "allow"


async def test_the_service_account_connects_with_the_password_of_its_broker_url(hook):
    _, http = hook
    assert await emqx_connect(http, LINK_USER, LINK_PASSWORD) == "allow"
    assert await emqx_connect(http, LINK_USER, LINK_PASSWORD + "x") == "deny"
    assert await rabbitmq(http, "user", username=LINK_USER, password=LINK_PASSWORD) == "allow"
    assert await rabbitmq(http, "user", username=LINK_USER, password="") == "deny"


async def test_a_device_uses_its_own_topics_only(hook):
    _, http = hook
    allowed = [
        ("publish", "devices/PLUG-1/state"),
        ("publish", "devices/PLUG-1/commands/result"),
        ("subscribe", "devices/PLUG-1/commands"),
    ]
    denied = [
        ("publish", "devices/PLUG-2/state"),
        ("publish", "devices/PLUG-1/commands"),  # only the service commands
        ("publish", "devices/PLUG-1/other"),
        ("subscribe", "devices/PLUG-2/commands"),
        ("subscribe", "devices/+/commands"),
        ("subscribe", "#"),
        ("subscribe", "devices/PLUG-1/state"),
        ("retain", "devices/PLUG-1/state"),  # not an action the hook knows
    ]
    for action, topic in allowed:
        assert await emqx_may(http, "PLUG-1", action, topic) == "allow", topic
    for action, topic in denied:
        assert await emqx_may(http, "PLUG-1", action, topic) == "deny", (action, topic)
    body = {"clientid": "PLUG-2", "username": "PLUG-1", "action": "publish"}
    mismatched = await http.post(
        "/mqtt/authorize", json={**body, "topic": "devices/PLUG-1/state"}, headers=BEARER
    )
    assert mismatched.json() == {"result": "deny"}


async def test_the_service_account_is_allowed_what_the_link_needs(hook):
    _, http = hook
    for action, topic in [
        ("publish", "devices/PLUG-1/commands"),
        ("subscribe", "devices/+/state"),
        ("subscribe", "devices/+/commands/result"),
        ("subscribe", "$share/devicecontrol/devices/+/state"),
        ("subscribe", "$SYS/brokers/+/clients/#"),
    ]:
        assert await emqx_may(http, LINK_USER, action, topic) == "allow", topic
    for action, topic in [
        ("publish", "devices/PLUG-1/state"),
        ("publish", "devices/+/commands"),
        ("subscribe", "#"),
        ("subscribe", "$share//devices/+/state"),
        ("subscribe", "devices/+/commands"),
    ]:
        assert await emqx_may(http, LINK_USER, action, topic) == "deny", topic


async def test_rabbitmq_questions_follow_the_same_topic_rules(hook):
    _, http = hook
    device = {"username": "PLUG-1", "vhost": "/"}
    assert await rabbitmq(http, "vhost", **device, ip="127.0.0.1") == "allow"
    assert await rabbitmq(http, "vhost", username="PLUG-1", vhost="other") == "deny"
    assert await rabbitmq(http, "vhost", username="ana@example.com", vhost="/") == "deny"
    resources = [
        ("exchange", "amq.topic", "write", "allow"),
        ("exchange", "amq.topic", "read", "allow"),
        ("exchange", "amq.topic", "configure", "deny"),
        ("exchange", "amq.direct", "write", "deny"),
        ("queue", "mqtt-subscription-PLUG-1qos1", "configure", "allow"),
        ("queue", "mqtt-subscription-PLUG-2qos1", "read", "deny"),
        ("queue", "devicecontrol.readings.0", "read", "deny"),
    ]
    for kind, name, permission, expected in resources:
        answer = await rabbitmq(
            http, "resource", **device, resource=kind, name=name, permission=permission
        )
        assert answer == expected, (kind, name, permission)
    topics = [
        ("write", "devices.PLUG-1.state", "allow"),
        ("write", "devices.PLUG-1.commands.result", "allow"),
        ("write", "devices.PLUG-2.state", "deny"),
        ("read", "devices.PLUG-1.commands", "allow"),
        ("read", "devices.*.commands", "deny"),
        ("read", "devices.PLUG-2.commands", "deny"),
    ]
    for permission, key, expected in topics:
        asked = {"resource": "topic", "name": "amq.topic", "permission": permission}
        answer = await rabbitmq(http, "topic", **device, **asked, routing_key=key)
        assert answer == expected, (permission, key)
    link = {"username": LINK_USER, "vhost": "/"}
    for kind, name, permission, expected in [
        ("queue", "devicecontrol.readings.0", "configure", "allow"),
        ("exchange", "amq.rabbitmq.event", "read", "allow"),
        ("exchange", "amq.rabbitmq.event", "write", "deny"),
        ("queue", "mqtt-subscription-PLUG-1qos1", "read", "deny"),
    ]:
        answer = await rabbitmq(
            http, "resource", **link, resource=kind, name=name, permission=permission
        )
        assert answer == expected, (kind, name, permission)
    for permission, key, expected in [
        ("read", "devices.*.state", "allow"),
        ("write", "devices.PLUG-1.commands", "allow"),
        ("write", "devices.PLUG-1.state", "deny"),
    ]:
        asked = {"resource": "topic", "name": "amq.topic", "permission": permission}
        answer = await rabbitmq(http, "topic", **link, **asked, routing_key=key)
        assert answer == expected, (permission, key)
    events = {"resource": "topic", "name": "amq.rabbitmq.event", "routing_key": "connection.*"}
    assert await rabbitmq(http, "topic", **link, **events, permission="read") == "allow"
    assert await rabbitmq(http, "topic", **link, **events, permission="write") == "deny"
    assert await rabbitmq(http, "topic", **device, **events, permission="read") == "deny"


async def test_the_link_account_is_a_rabbitmq_administrator_only_with_the_management_api(
    settings: Settings,
):
    """Ending a rotated secret's connection through RabbitMQ's management API needs the
    tag; without that API the link's account gets no more than it needs."""
    link = MqttUrl(False, "127.0.0.1", 5672, LINK_USER, LINK_PASSWORD, protocol="amqp")
    managed = "http://127.0.0.1:15672"
    for management, expected in [(managed, "allow administrator"), (None, "allow")]:
        runtime = Runtime.from_settings(
            replace(settings, amqp_url=link, rabbitmq_management_url=management)
        )
        try:
            if management:  # one database for both
                await make_controller(runtime, "PLUG-1", device_secret=SECRET)
            transport = httpx.ASGITransport(app=create_hook_app(runtime, TOKEN))
            async with httpx.AsyncClient(transport=transport, base_url="http://hook") as http:
                asked = {"username": LINK_USER, "password": LINK_PASSWORD}
                assert await rabbitmq(http, "user", **asked) == expected
                wrong = {"username": LINK_USER, "password": "wrong"}
                assert await rabbitmq(http, "user", **wrong) == "deny"
                device = {"username": "PLUG-1", "password": SECRET, "client_id": "PLUG-1"}
                assert await rabbitmq(http, "user", **device) == "allow"
        finally:
            await runtime.close()
