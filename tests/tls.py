"""Certificates for the tests' TLS, made with the openssl command line: a private CA and a
server certificate it signs for 127.0.0.1, as an operator's private CA would."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

OPENSSL = "openssl"
TIMEOUT_S = 60


@dataclass(frozen=True)
class ServerCertificate:
    ca: Path  # what a client trusts
    cert: Path
    key: Path


def _openssl(*args: str) -> None:
    subprocess.run([OPENSSL, *args], check=True, capture_output=True, timeout=TIMEOUT_S)


def private_ca(directory: Path, name: str = "ca") -> tuple[Path, Path]:
    """A CA's certificate and key."""
    directory.mkdir(parents=True, exist_ok=True)
    cert, key = directory / f"{name}.pem", directory / f"{name}.key"
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-keyout", str(key),
             "-out", str(cert), "-subj", f"/CN=devicecontrol tests {name}")  # fmt: skip
    return cert, key


def server_certificate(directory: Path) -> ServerCertificate:
    """A CA, and a certificate for 127.0.0.1 that it signed."""
    ca_cert, ca_key = private_ca(directory)
    key, cert = directory / "server.key", directory / "server.pem"
    request, extensions = directory / "server.csr", directory / "server.ext"
    extensions.write_text("subjectAltName=IP:127.0.0.1\n", encoding="utf-8")
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(request),
             "-subj", "/CN=127.0.0.1")  # fmt: skip
    _openssl("x509", "-req", "-in", str(request), "-CA", str(ca_cert), "-CAkey", str(ca_key),
             "-CAcreateserial", "-days", "2", "-extfile", str(extensions),
             "-out", str(cert))  # fmt: skip
    return ServerCertificate(ca_cert, cert, key)
