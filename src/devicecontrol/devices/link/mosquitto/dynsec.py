"""Device accounts on an external Mosquitto broker: its dynamic-security plugin, kept in
step with provisioning (contract §9, ``DEVICECONTROL_MQTT_URL``).

With an external broker, Mosquitto checks a device's CONNECT and its topics, so it must
know each device's secret and rules. Only digests of secrets are stored here, so the
plaintext exists only while an operator's command sets it: ``controllers add``, ``import``
and ``rotate-secret`` send the device to the broker (``$CONTROL/dynamic-security/v1``) and
wait for its answer before their transaction commits; a refusal or an unreachable broker
fails the command and writes nothing.

Each device gets a client (username = client id = serial number, the password its secret)
and a role of its own, ``devicecontrol-device:<sn>``: publish to ``devices/<sn>/state`` and
``devices/<sn>/commands/result``, subscribe to and receive ``devices/<sn>/commands``. A
role per device because Mosquitto 2.0.11's dynamic security has no ``%c``/``%u`` patterns in
ACLs (checked: a shared role with ``devices/%c/state`` lets nothing through). Everything
else stays refused by the plugin's default access (publish and subscribe denied).
``setClientPassword`` makes Mosquitto close a connection made with the old secret at once.

Mosquitto 2.0.11 rewrites its whole dynamic-security file after every command, and runs
commands on its one thread: each takes longer as the number of accounts grows (measured:
2,000 devices, 4,000 commands, 43 s; docs/OPERATIONS.md). Accounts go in batches of
``BATCH_DEVICES`` devices, one message each, so that the broker serves its devices in
between.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import aiomqtt
import msgspec

from devicecontrol.config import Settings
from devicecontrol.devices import topics
from devicecontrol.devices.link.mqtt_session.connection import (
    one_line,
    subscription_refused,
    tls_context,
)
from devicecontrol.errors import DomainError

CONTROL_TOPIC = "$CONTROL/dynamic-security/v1"
RESPONSE_TOPIC = "$CONTROL/dynamic-security/v1/response"
ROLE_PREFIX = "devicecontrol-device:"
BATCH_DEVICES = 100
CONNECT_TIMEOUT_S = 10
# the broker's answer to one batch; generous, since each command costs more as the
# dynamic-security file grows
ANSWER_TIMEOUT_S = 120
# what Mosquitto answers when a thing to create is there already, or one to delete is not
ALREADY_THERE = frozenset({"Role already exists", "Client already exists"})
NOT_THERE = frozenset({"Role not found", "Client not found"})


class BrokerAccountError(DomainError):
    """The broker did not take a device account: the command fails, nothing is written."""

    status = 503


@dataclass(frozen=True, slots=True)
class Command:
    """One dynamic-security command, and the errors that mean "nothing to do"."""

    body: dict[str, Any]
    tolerated: frozenset[str] = field(default_factory=frozenset)


def role_name(serial_number: str) -> str:
    return ROLE_PREFIX + serial_number


def device_acls(serial_number: str) -> list[dict[str, Any]]:
    """What a device may do: the rules of its role (also what a fleet's file holds)."""
    commands = topics.commands_topic(serial_number)
    return [
        {"acltype": "publishClientSend", "topic": topics.state_topic(serial_number),
         "allow": True},
        {"acltype": "publishClientSend", "topic": topics.result_topic(serial_number),
         "allow": True},
        {"acltype": "subscribeLiteral", "topic": commands, "allow": True},
        {"acltype": "publishClientReceive", "topic": commands, "allow": True},
    ]  # fmt: skip


def _create(serial_number: str, secret: str) -> list[Command]:
    role = role_name(serial_number)
    return [
        Command(
            {"command": "createRole", "rolename": role, "acls": device_acls(serial_number)},
            ALREADY_THERE,
        ),
        Command(
            {"command": "createClient", "username": serial_number, "password": secret,
             "clientid": serial_number, "roles": [{"rolename": role}]},
            ALREADY_THERE,
        ),
    ]  # fmt: skip


def ensure_account(serial_number: str, secret: str) -> list[Command]:
    """The account, unless the broker has one: a registered device imported again (the
    way an existing fleet is moved to the broker) is not disconnected."""
    return _create(serial_number, secret)


def replace_account(serial_number: str, secret: str) -> list[Command]:
    """A new device's account, in place of any the broker has for that serial (a leftover
    of an earlier try; no device of that serial is registered)."""
    return [
        Command({"command": "deleteClient", "username": serial_number}, NOT_THERE),
        Command({"command": "deleteRole", "rolename": role_name(serial_number)}, NOT_THERE),
        *_create(serial_number, secret),
    ]


def rotate_account(serial_number: str, secret: str) -> list[Command]:
    """A new secret; the account is made first if the broker has none (a device that had
    no secret, or was registered before the broker was). Mosquitto ends a connection made
    with the old secret when the password is set."""
    return [
        *_create(serial_number, secret),
        Command({"command": "setClientPassword", "username": serial_number, "password": secret}),
    ]


class DynamicSecurity:
    """A short connection of an operator's command to the broker's dynamic security.

    ``async with DynamicSecurity(settings) as broker: await broker.run(commands)``; every
    failure is a ``BrokerAccountError`` whose message is one line naming the broker (never
    its password).
    """

    def __init__(self, settings: Settings) -> None:
        url = settings.mqtt_url
        assert url is not None, "no external broker is configured"
        self.url = url
        self._client = aiomqtt.Client(
            url.host,
            url.port,
            identifier=f"devicecontrol-cli-{secrets.token_hex(6)}",
            username=url.username,
            password=url.password,
            clean_session=True,
            tls_context=tls_context(url, settings.mqtt_ca),
            timeout=CONNECT_TIMEOUT_S,
        )
        self._batches = 0

    def _error(self, what: str) -> BrokerAccountError:
        return BrokerAccountError(f"the MQTT broker at {self.url} (DEVICECONTROL_MQTT_URL) {what}")

    async def __aenter__(self) -> DynamicSecurity:
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT_S):
                await self._client.__aenter__()
        except (aiomqtt.MqttError, TimeoutError) as exc:
            raise self._error(f"cannot be reached: {one_line(exc)}") from None
        try:
            [granted] = await self._client.subscribe(RESPONSE_TOPIC, qos=1)
        except aiomqtt.MqttError as exc:
            await self._close()
            raise self._error(f"was lost: {one_line(exc)}") from None
        if subscription_refused(granted):
            await self._close()
            raise self._error(
                f"does not let the service's user read {RESPONSE_TOPIC} (docs/OPERATIONS.md)"
            )
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self._close()

    async def _close(self) -> None:
        with contextlib.suppress(aiomqtt.MqttError):  # it is gone already
            await self._client.__aexit__(None, None, None)

    async def run(self, commands: Sequence[Command]) -> None:
        """Send the commands in one message and wait for every answer; an error Mosquitto
        gave that is not tolerated is a ``BrokerAccountError``."""
        if not commands:
            return
        self._batches += 1
        ids = [f"{self._batches}.{index}" for index in range(len(commands))]
        payload = {
            "commands": [
                {**command.body, "correlationData": id_}
                for command, id_ in zip(commands, ids, strict=True)
            ]
        }
        try:
            await self._client.publish(CONTROL_TOPIC, msgspec.json.encode(payload), qos=1)
            async with asyncio.timeout(ANSWER_TIMEOUT_S):
                answers = await self._answers(set(ids))
        except aiomqtt.MqttError as exc:
            raise self._error(f"was lost: {one_line(exc)}") from None
        except TimeoutError:
            raise self._error(
                f"did not answer within {ANSWER_TIMEOUT_S} s (is its dynamic-security plugin "
                "loaded?)"
            ) from None
        for command, id_ in zip(commands, ids, strict=True):
            error = answers[id_].get("error")
            if error and error not in command.tolerated:
                name = command.body.get("username") or command.body.get("rolename")
                raise self._error(f"refused {command.body['command']} {name}: {error}")

    async def _answers(self, ids: set[str]) -> dict[str, dict[str, Any]]:
        found: dict[str, dict[str, Any]] = {}
        async for message in self._client.messages:
            if message.topic.value != RESPONSE_TOPIC:
                continue
            try:
                answer = msgspec.json.decode(message.payload)
                responses = answer["responses"]
            except (msgspec.DecodeError, TypeError, KeyError):
                continue
            for response in responses:
                if isinstance(response, dict) and response.get("correlationData") in ids:
                    found[response["correlationData"]] = response
            if len(found) == len(ids):
                return found
        raise aiomqtt.MqttError("the connection ended")

    async def run_in_batches(self, accounts: Iterable[list[Command]]) -> int:
        """Each device's commands, ``BATCH_DEVICES`` devices a message; how many devices."""
        batch: list[Command] = []
        devices = pending = 0
        for commands in accounts:
            batch.extend(commands)
            devices += 1
            pending += 1
            if pending == BATCH_DEVICES:
                await self.run(batch)
                batch, pending = [], 0
        await self.run(batch)
        return devices
