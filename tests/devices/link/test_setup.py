"""How the device link is set up: TLS on the listener, a taken port, amqtt's loggers (its
codec's) kept away from debug."""

from __future__ import annotations

import dataclasses
import shutil
import ssl
import subprocess

import aiomqtt
import pytest

from devicecontrol.devices.link.compose import build_link
from devicecontrol.devices.link.ports import LinkError
from devicecontrol.runtime import Runtime
from tests.devices.link.support import SECRET, eventually, is_online, provision

SERIAL = "PLUG-1"


@pytest.fixture
def certificate(tmp_path) -> tuple[str, str]:
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("needs the openssl command to make a certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    return str(cert), str(key)


async def test_with_a_certificate_and_key_the_listener_speaks_tls_only(settings, certificate):
    cert, key = certificate
    tls = dataclasses.replace(settings, mqtt_tls_cert=cert, mqtt_tls_key=key)
    runtime = Runtime.from_settings(tls)
    link = build_link(runtime, listen="127.0.0.1:0")
    try:
        await provision(runtime, SERIAL)
        await link.start()
        trusting = ssl.create_default_context(cafile=cert)
        client = aiomqtt.Client("127.0.0.1", link.port, identifier=SERIAL, username=SERIAL,
                                password=SECRET, tls_context=trusting, timeout=5)  # fmt: skip
        async with client:
            await eventually(lambda: is_online(runtime, SERIAL))
        plain = aiomqtt.Client("127.0.0.1", link.port, identifier=SERIAL, username=SERIAL,
                               password=SECRET, timeout=1)  # fmt: skip
        with pytest.raises(aiomqtt.MqttError):
            async with plain:
                pass
    finally:
        await link.stop()
        await runtime.close()


async def test_unusable_tls_files_are_a_one_line_link_error(settings, tmp_path):
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n")
    bad = dataclasses.replace(settings, mqtt_tls_cert=str(garbage), mqtt_tls_key=str(garbage))
    runtime = Runtime.from_settings(bad)
    try:
        with pytest.raises(LinkError) as failed:
            await build_link(runtime, listen="127.0.0.1:0").start()
    finally:
        await runtime.close()
    assert "\n" not in str(failed.value)
    assert "DEVICECONTROL_MQTT_TLS_CERT" in str(failed.value)
