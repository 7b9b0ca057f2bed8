"""Private RabbitMQ nodes for the tests (never the machine's shared one on 5672): Debian's
``rabbitmq-server`` with a node name, ports, data and log directories, plugins and a
configuration of the test's own, the MQTT plugin asking the service's broker hook through
the HTTP auth backend (the configuration docs/OPERATIONS.md gives).

The node runs as the ``rabbitmq`` user (Debian's wrapper switches to it), so its directory
is made in /tmp and handed to that user: a test's own tmp_path is not open to it. A node
answers MQTT about 10 s after it starts.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.processes import free_port

START_TIMEOUT_S = 60
STOP_TIMEOUT_S = 30
PLUGINS = ("rabbitmq_mqtt", "rabbitmq_auth_backend_http", "rabbitmq_event_exchange")


@dataclass(frozen=True)
class RabbitNode:
    name: str
    directory: Path
    amqp_port: int
    mqtt_port: int

    def log(self) -> str:
        logs = sorted((self.directory / "log").glob("*.log"))
        return "\n".join(path.read_text(errors="replace")[-4000:] for path in logs)


def hook_configuration(hook_base_url: str, token: str) -> str:
    """The HTTP auth backend's lines: every question to the hook, the token first."""
    return "".join(
        f"auth_http.{question}_path = {hook_base_url}/{token}/rabbitmq/{question}\n"
        for question in ("user", "vhost", "resource", "topic")
    )


def _answers(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(0.5)
        return probe.connect_ex(("127.0.0.1", port)) == 0


@contextmanager
def private_rabbitmq(hook_base_url: str, token: str) -> Iterator[RabbitNode]:
    """A one-node RabbitMQ whose MQTT listener asks the hook at ``hook_base_url``."""
    directory = Path(tempfile.mkdtemp(prefix="devicecontrol-rabbitmq-"))
    node = RabbitNode(
        f"devicecontrol-test-{os.getpid()}-{free_port()}@localhost",
        directory,
        free_port(),
        free_port(),
    )
    (directory / "rabbitmq.conf").write_text(
        f"listeners.tcp.default = 127.0.0.1:{node.amqp_port}\n"
        f"mqtt.listeners.tcp.default = 127.0.0.1:{node.mqtt_port}\n"
        "mqtt.allow_anonymous = false\n"
        "auth_backends.1 = http\n"
        "auth_http.http_method = post\n" + hook_configuration(hook_base_url, token),
        encoding="utf-8",
    )
    (directory / "enabled_plugins").write_text(f"[{','.join(PLUGINS)}].\n", encoding="utf-8")
    for part in ("mnesia", "log"):
        (directory / part).mkdir()
    shutil.chown(directory, "rabbitmq", "rabbitmq")
    for path in directory.rglob("*"):
        shutil.chown(path, "rabbitmq", "rabbitmq")
    environment = {
        **os.environ,
        "RABBITMQ_NODENAME": node.name,
        "RABBITMQ_DIST_PORT": str(free_port()),
        "RABBITMQ_MNESIA_BASE": str(directory / "mnesia"),
        "RABBITMQ_LOG_BASE": str(directory / "log"),
        "RABBITMQ_ENABLED_PLUGINS_FILE": str(directory / "enabled_plugins"),
        "RABBITMQ_CONFIG_FILE": str(directory / "rabbitmq"),
    }
    process = subprocess.Popen(
        ["rabbitmq-server"],
        env=environment,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not _answers(node.mqtt_port):
            if process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"RabbitMQ node {node.name} did not start:\n{node.log()}")
            time.sleep(0.25)
        yield node
    finally:
        subprocess.run(
            ["rabbitmqctl", "-n", node.name, "stop"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=STOP_TIMEOUT_S,
            check=False,
        )
        try:
            process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, 9)
            process.wait()
        shutil.rmtree(directory, ignore_errors=True)
