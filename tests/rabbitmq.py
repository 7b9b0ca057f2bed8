"""Private RabbitMQ clusters for the tests (never the machine's shared one on 5672): Debian's
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
from tests.tls import ServerCertificate

START_TIMEOUT_S = 60
STOP_TIMEOUT_S = 30
PLUGINS = (
    "rabbitmq_mqtt",
    "rabbitmq_auth_backend_http",
    "rabbitmq_event_exchange",
    "rabbitmq_consistent_hash_exchange",
)


@dataclass(frozen=True)
class RabbitNode:
    name: str
    directory: Path
    amqp_port: int
    mqtt_port: int
    mqtts_port: int | None  # MQTT over TLS, on a node given a certificate
    amqps_port: int | None  # AMQP over TLS, the same
    management_port: int | None  # the management API, on a node that has it

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


def _ctl(node: RabbitNode, *args: str) -> None:
    done = subprocess.run(
        ["rabbitmqctl", "-n", node.name, *args],
        capture_output=True,
        text=True,
        timeout=STOP_TIMEOUT_S * 2,
        check=False,
    )
    assert done.returncode == 0, f"rabbitmqctl {args}: {done.stdout}{done.stderr}"


def _wait_for(node: RabbitNode, port: int, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while not _answers(port):
        if process.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"RabbitMQ node {node.name} did not start:\n{node.log()}")
        time.sleep(0.25)


@contextmanager
def _node(
    hook_base_url: str, token: str, tls: ServerCertificate | None, *, management: bool = False
) -> Iterator[tuple[RabbitNode, subprocess.Popen[bytes]]]:
    """A node started (not yet answering: ``_wait_for``), stopped and removed at the end."""
    directory = Path(tempfile.mkdtemp(prefix="devicecontrol-rabbitmq-"))
    node = RabbitNode(
        f"devicecontrol-test-{os.getpid()}-{free_port()}@localhost",
        directory,
        free_port(),
        free_port(),
        free_port() if tls is not None else None,
        free_port() if tls is not None else None,
        free_port() if management else None,
    )
    extra_lines = ""
    if tls is not None:  # the files where the node's user can read them
        for name, source in (("ca", tls.ca), ("cert", tls.cert), ("key", tls.key)):
            shutil.copy(source, directory / f"{name}.pem")
        extra_lines = (
            f"mqtt.listeners.ssl.default = 127.0.0.1:{node.mqtts_port}\n"
            f"listeners.ssl.default = 127.0.0.1:{node.amqps_port}\n"
            f"ssl_options.cacertfile = {directory / 'ca.pem'}\n"
            f"ssl_options.certfile = {directory / 'cert.pem'}\n"
            f"ssl_options.keyfile = {directory / 'key.pem'}\n"
            "ssl_options.verify = verify_none\n"
            "ssl_options.fail_if_no_peer_cert = false\n"
        )
    if management:  # statistics each second: a new connection is known to it that soon
        extra_lines += "collect_statistics_interval = 1000\n"
        extra_lines += (
            f"management.tcp.ip = 127.0.0.1\nmanagement.tcp.port = {node.management_port}\n"
        )
    # every node reports its connections to the cluster's management API (the agent)
    plugins = (*PLUGINS, "rabbitmq_management" if management else "rabbitmq_management_agent")
    (directory / "rabbitmq.conf").write_text(
        f"listeners.tcp.default = 127.0.0.1:{node.amqp_port}\n"
        f"mqtt.listeners.tcp.default = 127.0.0.1:{node.mqtt_port}\n"
        "mqtt.allow_anonymous = false\n"
        "auth_backends.1 = http\n"
        "auth_http.http_method = post\n" + hook_configuration(hook_base_url, token) + extra_lines,
        encoding="utf-8",
    )
    (directory / "enabled_plugins").write_text(f"[{','.join(plugins)}].\n", encoding="utf-8")
    for part in ("mnesia", "log"):
        (directory / part).mkdir()
    for path in (directory, *directory.rglob("*")):
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
        yield node, process
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


@contextmanager
def private_rabbitmq_cluster(
    hook_base_url: str, token: str, *, tls: ServerCertificate | None = None
) -> Iterator[tuple[RabbitNode, RabbitNode]]:
    """Two nodes in one cluster, both asking the hook at ``hook_base_url``; the first also
    speaks MQTT and AMQP over TLS with ``tls``'s certificate and has the management API.
    Started side by side (about 10 s), then the second joins the first."""
    with (
        _node(hook_base_url, token, tls, management=True) as (first, first_process),
        _node(hook_base_url, token, None) as (second, second_process),
    ):
        _wait_for(first, first.mqtt_port, first_process)
        _wait_for(second, second.mqtt_port, second_process)
        for step in (["stop_app"], ["reset"], ["join_cluster", first.name], ["start_app"]):
            _ctl(second, *step)
        _wait_for(second, second.mqtt_port, second_process)
        yield first, second


@contextmanager
def private_rabbitmq(
    hook_base_url: str, token: str, *, management: bool = False
) -> Iterator[RabbitNode]:
    """One node asking the hook at ``hook_base_url`` (no cluster needed), with the
    management API when asked."""
    with _node(hook_base_url, token, None, management=management) as (node, process):
        _wait_for(node, node.mqtt_port, process)
        yield node
