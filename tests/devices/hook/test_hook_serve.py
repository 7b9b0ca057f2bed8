"""``serve`` starts the broker hook in a process of its own when asked: a port it cannot
have is one line on stderr and exit 1, before HTTP listens."""

from __future__ import annotations

import socket
import ssl
import subprocess

import httpx
import pytest

from tests.cli.support import run_cli_in_process
from tests.one_shot import ONE_SHOT
from tests.processes import free_port, run_cli, running_server
from tests.tls import server_certificate

TOKEN = "hook-token-of-the-serve-test-0123456789ab"


def serve_without_link(env: dict[str, str], workdir) -> subprocess.CompletedProcess[str]:
    """``serve --no-device-link`` on a new SQLite file, run to its end (a refused start)."""
    return run_cli(
        "serve",
        "--port",
        str(free_port()),
        "--no-device-link",
        database_url=f"sqlite:///{workdir / 'serve.db'}",
        env=env,
        cwd=workdir,
    )


def test_a_hook_port_already_taken_is_one_line_and_exit_1(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        hook = f"127.0.0.1:{taken.getsockname()[1]}"
        env = {
            "DEVICECONTROL_BROKER_HOOK_LISTEN": hook,
            "DEVICECONTROL_BROKER_HOOK_TOKEN": TOKEN,
        }
        result = serve_without_link(env, tmp_path)
    assert result.returncode == 1, result.stderr
    assert result.stderr.splitlines() == [
        f"Error: cannot listen for the broker on {hook} (DEVICECONTROL_BROKER_HOOK_LISTEN): "
        "Address already in use"
    ], result.stderr
    assert TOKEN not in result.stdout + result.stderr


def test_with_the_hook_provisioning_pushes_no_account_to_the_broker(tmp_path):
    """The broker asks the hook: ``controllers add`` and ``rotate-secret`` never contact it
    (here no broker listens at DEVICECONTROL_MQTT_URL; without the hook both fail)."""
    database_url = f"sqlite:///{tmp_path / 'accounts.db'}"
    nobody = {"DEVICECONTROL_MQTT_URL": f"mqtt://link:secret@127.0.0.1:{free_port()}"}
    hook = {
        **nobody,
        "DEVICECONTROL_BROKER_HOOK_LISTEN": f"127.0.0.1:{free_port()}",
        "DEVICECONTROL_BROKER_HOOK_TOKEN": TOKEN,
    }
    add = ["controllers", "add", "PLUG-1", "--mac", "AABBCCDDEEFF", "--type", "smart_plug"]
    refused = run_cli_in_process(*add, database_url=database_url, env=nobody, cwd=tmp_path)
    assert refused.returncode == 1 and "broker" in refused.stderr, refused.stderr
    added = run_cli_in_process(*add, database_url=database_url, env=hook, cwd=tmp_path)
    assert added.returncode == 0, added.stderr
    rotate = ["controllers", "rotate-secret", "PLUG-1"]
    unrotated = run_cli_in_process(*rotate, database_url=database_url, env=nobody, cwd=tmp_path)
    assert unrotated.returncode == 1, unrotated.stderr
    rotated = run_cli_in_process(*rotate, database_url=database_url, env=hook, cwd=tmp_path)
    assert rotated.returncode == 0, rotated.stderr


def test_the_hook_speaks_tls_with_its_certificate_and_only_tls(tmp_path):
    certificate = server_certificate(tmp_path / "tls")
    hook = f"127.0.0.1:{free_port()}"
    env = {
        "DEVICECONTROL_BROKER_HOOK_LISTEN": hook,
        "DEVICECONTROL_BROKER_HOOK_TOKEN": TOKEN,
        "DEVICECONTROL_BROKER_HOOK_TLS_CERT": str(certificate.cert),
        "DEVICECONTROL_BROKER_HOOK_TLS_KEY": str(certificate.key),
    }
    url = f"sqlite:///{tmp_path / 'tls.db'}"
    with running_server(url, tmp_path, env=env):
        trusted = ssl.create_default_context(cafile=str(certificate.ca))
        with httpx.Client(verify=trusted, timeout=5) as trusting:
            assert trusting.post(f"https://{hook}/mqtt/authenticate", json={}).status_code == 401
            answer = trusting.post(
                f"https://{hook}/{TOKEN}/rabbitmq/user", data={"username": "X", "password": "y"}
            )
            assert answer.status_code == 200 and answer.text == "deny"
        with pytest.raises(httpx.TransportError):
            ONE_SHOT.post(f"http://{hook}/mqtt/authenticate", json={}, timeout=5)


def test_an_unusable_hook_certificate_is_one_line_and_exit_1(tmp_path):
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n")
    env = {
        "DEVICECONTROL_BROKER_HOOK_LISTEN": f"127.0.0.1:{free_port()}",
        "DEVICECONTROL_BROKER_HOOK_TOKEN": TOKEN,
        "DEVICECONTROL_BROKER_HOOK_TLS_CERT": str(garbage),
        "DEVICECONTROL_BROKER_HOOK_TLS_KEY": str(garbage),
    }
    result = serve_without_link(env, tmp_path)
    assert result.returncode == 1, result.stderr
    [line] = result.stderr.splitlines()
    assert "DEVICECONTROL_BROKER_HOOK_TLS_CERT" in line
