"""One structured line per request, and the request id: kept when sane, else made; echoed."""

from __future__ import annotations

import logging
import re
from dataclasses import replace
from ipaddress import ip_network
from typing import Any

import httpx
import pytest

from devicecontrol.config import Settings
from tests.asgi import app_client
from tests.conftest import SQLITE_ENOUGH
from tests.factories import logged_in_user

pytestmark = SQLITE_ENOUGH

GENERATED_ID = re.compile(r"[0-9a-f]{32}")
SERIAL_ROUTE = "/v1/controllers/{serial_number}"


def request_lines(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    return [r.fields for r in caplog.records if r.name == "devicecontrol.access"]


@pytest.fixture
def info(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.INFO, logger="devicecontrol")
    return caplog


async def test_each_request_writes_one_line_with_route_template_status_and_user(
    runtime, client, info
):
    user_id, headers = await logged_in_user(runtime, client)
    info.clear()
    response = await client.get("/v1/controllers/NO-SUCH-9", headers=headers)
    assert response.status_code == 404
    [line] = request_lines(info)
    assert line == {
        "event": "request",
        "request_id": response.headers["x-request-id"],
        "method": "GET",
        "route": SERIAL_ROUTE,
        "status": 404,
        "duration_ms": line["duration_ms"],
        "user_id": user_id,
        "client": "testclient",
    }
    assert 0 < line["duration_ms"] < 10_000
    assert info.records[-1].levelno == logging.INFO


async def test_an_unauthenticated_request_has_no_user_and_an_unknown_path_no_route(client, info):
    assert (await client.get("/v1/users/me")).status_code == 401
    assert (await client.get("/nothing/here")).status_code == 404
    first, second = request_lines(info)
    assert (first["route"], first["status"], first["user_id"]) == ("/v1/users/me", 401, None)
    assert (second["route"], second["status"]) == ("<unmatched>", 404)
    assert "path" not in first  # a matched route is named by its template alone
    assert (second["method"], second["path"]) == ("GET", "/nothing/here")


async def test_an_unmatched_request_names_its_path_but_never_its_query(client, info):
    """What clients call that the service lacks, so an operator sees it; never credentials."""
    response = await client.post(
        "/v1/rooms/a%20b?access_token=s3cret&x=1", json={"password": "hunter22"}
    )
    assert response.status_code == 404
    [line] = request_lines(info)
    assert (line["method"], line["route"], line["path"]) == (
        "POST",
        "<unmatched>",
        "/v1/rooms/a%20b",
    )
    assert "s3cret" not in repr(info.records) and "hunter22" not in repr(info.records)


async def test_a_long_unmatched_path_is_cut(client, info):
    assert (await client.get("/v1/" + "x" * 5000)).status_code == 404
    [line] = request_lines(info)
    assert len(line["path"]) == 256 and line["path"].endswith("...")
    assert line["path"].startswith("/v1/xxx")


@pytest.mark.parametrize(
    "incoming",
    [
        "abc-123",
        "0f8e7c2a-2b1d-4c3e-9f00-123456789abc",
        "Root=1-5f84c7a1-abc:def/g+h.i_j",
        "A" * 128,
    ],
)
async def test_a_sane_incoming_request_id_is_kept_echoed_and_logged(client, info, incoming):
    response = await client.get("/v1/users/me", headers={"X-Request-ID": incoming})
    assert response.headers["x-request-id"] == incoming
    assert [line["request_id"] for line in request_lines(info)] == [incoming]


@pytest.mark.parametrize(
    "incoming",
    [
        "",
        "A" * 129,
        "two words",
        'a"quote',
        "tab\there",
        "semi;colon",
        "<script>",
        '{"event":"login"}',
        "caf\u00e9",
    ],
)
async def test_an_insane_request_id_is_replaced_by_a_new_one(client, info, incoming):
    raw = incoming.encode("latin-1")
    response = await client.get("/v1/users/me", headers=[(b"x-request-id", raw)])
    echoed = response.headers["x-request-id"]
    assert GENERATED_ID.fullmatch(echoed), echoed
    assert echoed != incoming
    [line] = request_lines(info)
    assert line["request_id"] == echoed


async def test_without_a_request_id_each_request_gets_a_new_one(client):
    first = (await client.get("/healthz")).headers["x-request-id"]
    second = (await client.get("/healthz")).headers["x-request-id"]
    assert GENERATED_ID.fullmatch(first) and GENERATED_ID.fullmatch(second)
    assert first != second


async def test_only_the_first_request_id_header_counts(settings):
    # over a socket, repeated headers arrive one by one (the test client would join them)
    headers = [(b"x-request-id", b"first-id"), (b"x-request-id", b"second-id")]
    response = await answer_through(settings, "127.0.0.1", headers)
    assert response.headers["x-request-id"] == "first-id"


async def test_probes_and_scrapes_are_logged_at_debug_only(client, info):
    for path in ("/healthz", "/readyz", "/metrics"):
        assert (await client.get(path)).status_code == 200
    assert request_lines(info) == []
    info.set_level(logging.DEBUG, logger="devicecontrol")
    assert (await client.get("/healthz")).status_code == 200
    [line] = request_lines(info)
    assert (line["route"], line["status"]) == ("/healthz", 200)


async def test_an_error_answer_is_still_one_line_with_its_status(client, info):
    response = await client.post(
        "/v1/auth/login", content=b"{", headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 400
    [line] = request_lines(info)
    assert (line["route"], line["method"], line["status"]) == ("/v1/auth/login", "POST", 400)


async def test_an_unusual_method_is_logged_as_other(client, info):
    response = await client.request("PROPFIND", "/v1/users/me")
    assert response.status_code == 405
    [line] = request_lines(info)
    assert (line["method"], line["route"]) == ("OTHER", "<unmatched>")
    assert (line["path"], line["unknown_method"]) == ("/v1/users/me", "PROPFIND")


async def answer_through(
    settings: Settings, peer: str, headers: list[tuple[bytes, bytes]]
) -> httpx.Response:
    """GET /v1/users/me from a socket peer of our choosing, headers passed on as they are."""
    async with app_client(settings, peer=peer) as http:
        return await http.get("/v1/users/me", headers=headers)


@pytest.mark.parametrize(
    ("trusted", "expected"),
    [((), "10.1.2.3"), ((ip_network("10.1.2.3/32"),), "198.51.100.9")],
    ids=["untrusted peer", "trusted proxy"],
)
async def test_the_client_address_is_the_peer_or_what_a_trusted_proxy_forwarded(
    settings, info, trusted, expected
):
    proxied = replace(settings, trusted_proxies=trusted)
    await answer_through(proxied, "10.1.2.3", [(b"x-forwarded-for", b"198.51.100.9")])
    [line] = request_lines(info)
    assert line["client"] == expected


async def test_every_documented_response_declares_the_request_id_header(client):
    document = (await client.get("/openapi.json")).json()
    for path, item in document["paths"].items():
        for method, operation in item.items():
            for status, response in operation["responses"].items():
                header = response["headers"]["X-Request-ID"]
                assert header["required"] is True, (method, path, status)
                pattern = re.compile(header["schema"]["pattern"])
                assert pattern.fullmatch("0f8e7c2a-2b1d") and not pattern.fullmatch("a b")
