"""VerneMQ's webhooks answered by the broker hook (contract §9, "Brokers that ask the
service"), in-process on both databases, with the bodies VerneMQ's ``vmq_webhooks`` posts:
the same identity and topic rules as EMQX's and RabbitMQ's questions get, and a SUBSCRIBE
let through whole or refused whole.
"""

from __future__ import annotations

from typing import Any

import httpx

from devicecontrol.devices.identity import rotate_device_secret
from tests.devices.hook import test_hook_rules
from tests.devices.hook.test_hook_rules import (
    BEARER,
    LINK_PASSWORD,
    LINK_USER,
    OTHER_SECRET,
    SECRET,
    TOKEN,
)

hook = test_hook_rules.hook  # the same fixture: both databases, two plugs, the link's account

OK: dict[str, Any] = {"result": "ok"}
REFUSED: dict[str, Any] = {"result": {"error": "not_allowed"}}
DEVICE_ADDRESS = "198.51.100.7"


async def ask(http: httpx.AsyncClient, question: str, body: dict[str, Any]) -> dict[str, Any]:
    """As VerneMQ asks: a JSON POST naming its hook, the token as the path's first segment."""
    answer = await http.post(
        f"/{TOKEN}/vernemq/{question}", json=body, headers={"vernemq-hook": question}
    )
    assert answer.status_code == 200, answer.text
    assert "cache-control" not in answer.headers  # VerneMQ would cache the answer
    return answer.json()


def registration(username: str | None, password: str | None, **more: Any) -> dict[str, Any]:
    body = {
        "peer_addr": DEVICE_ADDRESS,
        "peer_port": 50123,
        "username": username,
        "password": password,
        "mountpoint": "",
        "client_id": username,
        "clean_session": True,
    }
    return {**body, **more}


def publication(username: str, topic: str, **more: Any) -> dict[str, Any]:
    body = {
        "username": username,
        "client_id": username,
        "mountpoint": "",
        "qos": 1,
        "topic": topic,
        "payload": "eyJ0ZW1wIjogMjEuNX0=",  # base64, VerneMQ's default
        "retain": False,
    }
    return {**body, **more}


def subscription(username: str, *filters: str, **more: Any) -> dict[str, Any]:
    body = {
        "username": username,
        "client_id": username,
        "mountpoint": "",
        "topics": [{"topic": topic_filter, "qos": 1} for topic_filter in filters],
    }
    return {**body, **more}


async def test_only_the_broker_with_the_token_is_answered_and_bad_bodies_are_400(hook):
    _, http = hook
    body = registration("PLUG-1", SECRET)
    for refused in (
        await http.post("/vernemq/auth_on_register", json=body),
        await http.post(f"/{TOKEN[:-1]}/vernemq/auth_on_register", json=body),
        await http.post(f"/vernemq/{TOKEN}/auth_on_register", json=body),
    ):
        assert refused.status_code == 401
        assert refused.headers["content-type"] == "application/problem+json"
    assert await ask(http, "auth_on_register", body) == OK
    by_header = await http.post("/vernemq/auth_on_register", json=body, headers=BEARER)
    assert by_header.json() == OK
    # what VerneMQ should never send, answered in words, never a 500
    deep = b'{"client_id": "PLUG-1", "topic": "t", "x": ' + b"[" * 5_000 + b"]" * 5_000 + b"}"
    for question, raw in [
        ("auth_on_register", b"{"),
        ("auth_on_register", b"[1, 2]"),
        ("auth_on_register", b'{"client_id": 7, "username": "PLUG-1"}'),
        ("auth_on_register_m5", b'{"username": "PLUG-1", "password": "x"}'),  # no client_id
        ("auth_on_publish", deep),
        ("auth_on_publish_m5", b'{"client_id": "PLUG-1", "topic": ["devices"]}'),
        ("auth_on_subscribe", b'{"client_id": "PLUG-1", "topics": "devices/PLUG-1/commands"}'),
        ("auth_on_subscribe_m5", b'{"client_id": "PLUG-1", "topics": [{"qos": 1}]}'),
    ]:
        bad = await http.post(
            f"/{TOKEN}/vernemq/{question}",
            content=raw,
            headers={"Content-Type": "application/json", "vernemq-hook": question},
        )
        assert bad.status_code == 400, (question, raw[:30], bad.status_code, bad.text)
        assert bad.headers["content-type"] == "application/problem+json"


async def test_a_device_registers_with_its_secret_and_its_serial_as_client_id(hook):
    _, http = hook
    assert await ask(http, "auth_on_register", registration("PLUG-1", SECRET)) == OK
    m5 = registration("PLUG-2", OTHER_SECRET, clean_start=True, properties={})
    del m5["clean_session"]
    assert await ask(http, "auth_on_register_m5", m5) == OK
    refused = [
        registration("PLUG-1", OTHER_SECRET),  # another's secret
        registration("PLUG-1", ""),
        registration("PLUG-1", None),  # VerneMQ's null: no password sent
        registration("PLUG-9", SECRET),  # no such controller
        registration("PLUG-1", SECRET, client_id="PLUG-2"),
        registration(None, SECRET, client_id="PLUG-1"),
        registration("PLUG-1", SECRET, mountpoint="tenant-a"),
    ]
    for number, body in enumerate(refused):
        for m5, question in enumerate(("auth_on_register", "auth_on_register_m5")):
            # an address of its own: the refusal is the rule's, not the throttle's
            body["peer_addr"] = f"192.0.2.{2 * number + m5 + 1}"
            assert await ask(http, question, body) == REFUSED, (question, body)


async def test_a_rotated_secret_is_refused_at_the_next_question(hook):
    runtime, http = hook
    assert await ask(http, "auth_on_register", registration("PLUG-1", SECRET)) == OK
    new_secret = await rotate_device_secret(runtime, "PLUG-1")
    assert await ask(http, "auth_on_register", registration("PLUG-1", SECRET)) == REFUSED
    assert await ask(http, "auth_on_register", registration("PLUG-1", new_secret)) == OK


async def test_failures_are_throttled_per_peer_addr_and_never_keep_a_device_out_from_elsewhere(
    hook,
):
    _, http = hook
    attacker = "203.0.113.9"
    for _ in range(3):
        guess = registration("PLUG-1", "guess", peer_addr=attacker)
        assert await ask(http, "auth_on_register", guess) == REFUSED
    # throttled from there: even the right secret, the same answer
    from_attacker = registration("PLUG-1", SECRET, peer_addr=attacker)
    assert await ask(http, "auth_on_register", from_attacker) == REFUSED
    assert await ask(http, "auth_on_register", registration("PLUG-1", SECRET)) == OK


async def test_a_device_publishes_to_its_own_topics_only(hook):
    _, http = hook
    for topic in ("devices/PLUG-1/state", "devices/PLUG-1/commands/result"):
        assert await ask(http, "auth_on_publish", publication("PLUG-1", topic)) == OK
        m5 = publication("PLUG-1", topic, properties={})
        assert await ask(http, "auth_on_publish_m5", m5) == OK
    for refused in [
        publication("PLUG-1", "devices/PLUG-2/state"),
        publication("PLUG-1", "devices/PLUG-1/commands"),  # only the service commands
        publication("PLUG-1", "devices/PLUG-1/other"),
        publication("PLUG-1", "devices/PLUG-1/state", client_id="PLUG-2"),
        publication("PLUG-1", "devices/PLUG-1/state", mountpoint="tenant-a"),
    ]:
        assert await ask(http, "auth_on_publish", refused) == REFUSED, refused
    no_payload = publication("PLUG-1", "devices/PLUG-1/state")
    del no_payload["payload"]  # vmq_webhooks' no_payload = on
    assert await ask(http, "auth_on_publish", no_payload) == OK


async def test_a_device_subscribes_to_its_own_commands_only_and_a_subscribe_whole(hook):
    _, http = hook
    own = "devices/PLUG-1/commands"
    assert await ask(http, "auth_on_subscribe", subscription("PLUG-1", own)) == OK
    m5 = subscription("PLUG-1", own, properties={})
    m5["topics"][0].update(no_local=False, rap=False, retain_handling="send_retain")
    assert await ask(http, "auth_on_subscribe_m5", m5) == OK
    for refused in [
        subscription("PLUG-1", "devices/PLUG-2/commands"),
        subscription("PLUG-1", "devices/+/commands"),
        subscription("PLUG-1", "#"),
        subscription("PLUG-1", "devices/PLUG-1/state"),
        subscription("PLUG-1", own, "devices/PLUG-2/commands"),  # one refused: all refused
        subscription("PLUG-1"),  # no filter at all
        subscription("PLUG-1", own, client_id="PLUG-2"),
        subscription("PLUG-1", own, mountpoint="tenant-a"),
    ]:
        assert await ask(http, "auth_on_subscribe", refused) == REFUSED, refused
        assert await ask(http, "auth_on_subscribe_m5", refused) == REFUSED, refused


async def test_the_service_account_is_allowed_what_the_link_needs(hook):
    _, http = hook
    link = registration(LINK_USER, LINK_PASSWORD, client_id="devicecontrol-link-0")
    assert await ask(http, "auth_on_register", link) == OK
    wrong = registration(LINK_USER, LINK_PASSWORD + "x", client_id="devicecontrol-link-0")
    assert await ask(http, "auth_on_register", wrong) == REFUSED
    as_link = {"client_id": "devicecontrol-link-0"}
    commands = publication(LINK_USER, "devices/PLUG-1/commands", **as_link)
    assert await ask(http, "auth_on_publish", commands) == OK
    state = publication(LINK_USER, "devices/PLUG-1/state", **as_link)
    assert await ask(http, "auth_on_publish", state) == REFUSED
    needed = subscription(
        LINK_USER,
        "$share/devicecontrol/devices/+/state",
        "$share/devicecontrol/devices/+/commands/result",
        "devices/+/state",
        **as_link,
    )
    assert await ask(http, "auth_on_subscribe", needed) == OK
    for refused in ("#", "devices/+/commands", "$share//devices/+/state"):
        asked = subscription(LINK_USER, refused, **as_link)
        assert await ask(http, "auth_on_subscribe", asked) == REFUSED, refused
