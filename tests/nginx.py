"""A real nginx (the Debian package) in front of `serve` processes, owned by one test.

It runs deploy/nginx/devicecontrol.conf.template, filled in, inside a minimal main
configuration whose every path (pid, logs, temporary files) lies in the test's directory:
no root configuration is read, and nothing listens on port 80. nginx stays in the
foreground as the test's child and is stopped when the block ends, however it ends. The
certificate it serves is made here with the openssl command line, valid for 127.0.0.1.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.processes import free_port

NGINX = Path("/usr/sbin/nginx")
OPENSSL = "openssl"
TEMPLATE = Path(__file__).parent.parent / "deploy" / "nginx" / "devicecontrol.conf.template"
COMMAND_TIMEOUT_S = 30
START_TIMEOUT_S = 10
STOP_TIMEOUT_S = 10
PLACEHOLDER = re.compile(r"\$\{([A-Z_]+)\}")

MAIN_CONFIGURATION = """\
daemon off;
master_process on;
worker_processes 1;
pid {root}/nginx.pid;
error_log {root}/error.log notice;
{user}
events {{
    worker_connections 256;
}}

http {{
    default_type application/octet-stream;
    client_body_temp_path {root}/temp/body;
    proxy_temp_path {root}/temp/proxy;
    fastcgi_temp_path {root}/temp/fastcgi;
    uwsgi_temp_path {root}/temp/uwsgi;
    scgi_temp_path {root}/temp/scgi;
    include {root}/devicecontrol.conf;
}}
"""


@dataclass(frozen=True)
class Certificate:
    certificate: Path
    key: Path


def make_self_signed_certificate(directory: Path, host: str = "127.0.0.1") -> Certificate:
    """A one-day self-signed certificate for ``host`` (and localhost), as an operator makes one.

    It is its own issuer, so a client trusts it by loading this very file as its CA.
    """
    certificate, key = directory / "devicecontrol.crt", directory / "devicecontrol.key"
    subprocess.run(
        [OPENSSL, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-days", "1", "-subj", "/CN=devicecontrol test",
         "-addext", f"subjectAltName=IP:{host},DNS:localhost",
         "-addext", "keyUsage=critical,digitalSignature,keyCertSign",
         "-addext", "extendedKeyUsage=serverAuth",
         "-keyout", str(key), "-out", str(certificate)],
        check=True, capture_output=True, timeout=COMMAND_TIMEOUT_S,
    )  # fmt: skip
    return Certificate(certificate, key)


def render_template(values: Mapping[str, str], template: Path = TEMPLATE) -> str:
    """The template with every ``${NAME}`` replaced; a placeholder left unfilled is an error."""
    text = template.read_text(encoding="utf-8")
    missing = sorted(set(PLACEHOLDER.findall(text)) - set(values))
    if missing:
        raise ValueError(f"no value for {', '.join(missing)} in {template}")
    return PLACEHOLDER.sub(lambda match: values[match.group(1)], text)


@dataclass
class Nginx:
    process: subprocess.Popen[bytes]
    root: Path
    port: int

    @property
    def base_url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def access_log(self) -> str:
        return _read(self.root / "access.log")

    def error_log(self) -> str:
        return _read(self.root / "error.log") + _read(self.root / "nginx.stderr")


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return ""


def _write_configuration(root: Path, port: int, upstreams: list[str], cert: Certificate) -> Path:
    site = render_template(
        {
            "NGINX_LISTEN": f"127.0.0.1:{port}",
            "NGINX_SERVER_NAME": "127.0.0.1 localhost",
            "NGINX_CERTIFICATE": str(cert.certificate),
            "NGINX_CERTIFICATE_KEY": str(cert.key),
            "NGINX_ACCESS_LOG": str(root / "access.log"),
            "UPSTREAM_A": upstreams[0],
            "UPSTREAM_B": upstreams[1],
        }
    )
    (root / "devicecontrol.conf").write_text(site, encoding="utf-8")
    (root / "temp").mkdir()
    # nginx started by root runs its workers as "nobody", who may not enter the test's
    # directory; the workers must be able to write temporary files there
    user = "user root;" if os.geteuid() == 0 else ""
    main = root / "nginx.conf"
    main.write_text(MAIN_CONFIGURATION.format(root=root, user=user), encoding="utf-8")
    return main


def _nginx_command(root: Path, configuration: Path, *args: str) -> list[str]:
    # -e: the error log from the first moment, before the configuration names one
    return [str(NGINX), "-p", str(root), "-c", str(configuration), "-e", str(root / "error.log"),
            *args]  # fmt: skip


def _wait_until_listening(nginx: Nginx) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if nginx.process.poll() is not None:
            raise AssertionError(
                f"nginx exited with status {nginx.process.returncode}:\n{nginx.error_log()}"
            )
        try:
            socket.create_connection(("127.0.0.1", nginx.port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"nginx did not listen within {START_TIMEOUT_S} s:\n{nginx.error_log()}")


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGQUIT: nginx's graceful stop; then SIGKILL to the whole group (master and workers)."""
    for sig in (signal.SIGQUIT, signal.SIGKILL):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=STOP_TIMEOUT_S)
            return
        except subprocess.TimeoutExpired:
            continue


@contextmanager
def running_nginx(root: Path, upstreams: list[str], certificate: Certificate) -> Iterator[Nginx]:
    """nginx with the deploy/ configuration on a free port before ``upstreams`` (host:port)."""
    if not NGINX.exists():
        raise AssertionError(f"{NGINX} is missing: install the Debian package nginx")
    root.mkdir(parents=True, exist_ok=True)
    port = free_port()
    configuration = _write_configuration(root, port, upstreams, certificate)
    checked = subprocess.run(
        _nginx_command(root, configuration, "-t"),
        capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, check=False,
    )  # fmt: skip
    assert checked.returncode == 0, f"nginx -t refused the configuration:\n{checked.stderr}"
    with (root / "nginx.stderr").open("wb") as stderr:
        process = subprocess.Popen(
            _nginx_command(root, configuration),
            stdin=subprocess.DEVNULL,
            stdout=stderr,
            stderr=stderr,
            start_new_session=True,
        )
    nginx = Nginx(process, root, port)
    try:
        _wait_until_listening(nginx)
        yield nginx
    finally:
        _stop(process)
