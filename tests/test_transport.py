"""Contract §1 (transport) and the generic rules of §7 (problem details, 404, 405, no leaks)."""

from __future__ import annotations

import gzip
import json
from typing import Any

import pytest

from tests.conftest import SQLITE_ENOUGH
from tests.factories import (
    CLIENT_ID,
    CLIENT_SECRET,
    PASSWORD,
    logged_in_user,
    login,
    make_controller,
    make_user,
)

pytestmark = SQLITE_ENOUGH

HAL = "application/hal+json"
PROBLEM = "application/problem+json"
JSON_TYPE = {"Content-Type": "application/json"}
LOGIN = {
    "client_id": CLIENT_ID,
    "client_secret": CLIENT_SECRET,
    "username": "ana@example.com",
    "password": PASSWORD,
}


def hrefs(value: Any) -> list[str]:
    """Every ``href`` anywhere in a response body."""
    if isinstance(value, dict):
        found = [value["href"]] if isinstance(value.get("href"), str) else []
        return found + [h for v in value.values() for h in hrefs(v)]
    if isinstance(value, list):
        return [h for v in value for h in hrefs(v)]
    return []


def assert_problem(response: Any, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM
    body = response.json()
    assert body["type"] == "about:blank"
    assert body["status"] == status
    assert isinstance(body["title"], str) and body["title"]
    assert isinstance(body["detail"], str) and body["detail"]
    return body


@pytest.mark.parametrize("prefix", ["/v1", ""])
async def test_every_endpoint_answers_with_and_without_v1(runtime, client, prefix):
    _, headers = await logged_in_user(runtime, client)
    await make_user(runtime, "bob@example.com")
    await make_controller(runtime, "MINE1", owner="ana@example.com")
    await make_controller(runtime, "FREE1")
    refresh = (await login(client))["refresh_token"]
    renew_body = {"client_id": CLIENT_ID, "client_secret": CLIENT_SECRET, "refresh_token": refresh}
    calls = [
        ("POST", "/auth/login", {"json": LOGIN}),
        ("POST", "/auth/renew", {"json": renew_body}),
        ("GET", "/users/me", {"headers": headers}),
        ("GET", "/controllers", {"headers": headers}),
        ("GET", "/controllers/MINE1", {"headers": headers}),
        ("POST", "/controllers/FREE1/assign", {"headers": headers, "json": {}}),
        (
            "PATCH",
            "/controllers/MINE1/reassign",
            {"headers": headers, "json": {"owner": "bob@example.com"}},
        ),
    ]
    for method, path, options in calls:
        response = await client.request(method, prefix + path, **options)
        assert response.status_code == 200, (method, prefix + path, response.text)
        assert response.headers["content-type"] == HAL
        links = hrefs(response.json())
        assert links, (method, path)
        for href in links:
            assert href.startswith("/v1/"), href
            assert "://" not in href and "testserver" not in href, href


@pytest.mark.parametrize("path", ["/users/me", "/controllers", "/controllers/MINE1"])
async def test_unprefixed_read_gives_the_same_body_as_v1(runtime, client, path):
    _, headers = await logged_in_user(runtime, client)
    await make_controller(runtime, "MINE1", owner="ana@example.com")
    with_v1 = await client.get("/v1" + path, headers=headers)
    without = await client.get(path, headers=headers)
    assert with_v1.status_code == without.status_code == 200
    assert with_v1.json() == without.json()


async def test_self_link_of_unprefixed_login_carries_v1(runtime, client):
    await logged_in_user(runtime, client)
    response = await client.post("/auth/login", json=LOGIN)
    assert response.json()["_links"] == {"self": {"href": "/v1/auth/login"}}


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/xml", "multipart/form-data; boundary=x", ""]
)
async def test_login_body_of_another_content_type_is_415(runtime, client, content_type):
    await logged_in_user(runtime, client)
    response = await client.post(
        "/v1/auth/login", content=json.dumps(LOGIN).encode(), headers={"Content-Type": content_type}
    )
    assert_problem(response, 415)


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/x-www-form-urlencoded", "application/xml"]
)
async def test_controller_body_of_another_content_type_is_415(runtime, client, content_type):
    _, headers = await logged_in_user(runtime, client)
    await make_user(runtime, "bob@example.com")
    await make_controller(runtime, "MINE1", owner="ana@example.com")
    await make_controller(runtime, "FREE1")
    typed = {**headers, "Content-Type": content_type}
    reassign = await client.patch(
        "/v1/controllers/MINE1/reassign", content=b"owner=bob%40example.com", headers=typed
    )
    assert_problem(reassign, 415)
    assign = await client.post("/v1/controllers/FREE1/assign", content=b"{}", headers=typed)
    assert_problem(assign, 415)
    mine = await client.get("/v1/controllers/MINE1", headers=headers)
    assert mine.json()["controller"]["user_id"] is not None  # nothing was reassigned


@pytest.mark.parametrize(
    "content_type",
    ["application/json; charset=utf-8", "application/json;charset=UTF-8", "Application/JSON"],
)
async def test_json_body_with_charset_parameter_is_accepted(runtime, client, content_type):
    _, headers = await logged_in_user(runtime, client)
    await make_user(runtime, "bob@example.com")
    await make_controller(runtime, "MINE1", owner="ana@example.com")
    login_response = await client.post(
        "/v1/auth/login", content=json.dumps(LOGIN).encode(), headers={"Content-Type": content_type}
    )
    assert login_response.status_code == 200, login_response.text
    reassign = await client.patch(
        "/v1/controllers/MINE1/reassign",
        content=b'{"owner": "bob@example.com"}',
        headers={**headers, "Content-Type": content_type},
    )
    assert reassign.status_code == 200, reassign.text


@pytest.mark.parametrize(
    "content_type",
    ["application/x-www-form-urlencoded; charset=UTF-8", "application/x-www-form-urlencoded"],
)
async def test_form_login_with_or_without_charset_is_accepted(runtime, client, content_type):
    await logged_in_user(runtime, client)
    form = "&".join(f"{k}={v}" for k, v in LOGIN.items()).replace("@", "%40").replace(" ", "+")
    response = await client.post(
        "/v1/auth/login", content=form.encode(), headers={"Content-Type": content_type}
    )
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == HAL


@pytest.mark.parametrize("path", ["/v1/auth/login", "/v1/auth/renew"])
async def test_token_error_of_wrong_content_type_is_not_cacheable(runtime, client, path):
    response = await client.post(path, content=b"{}", headers={"Content-Type": "text/plain"})
    assert_problem(response, 415)
    assert response.headers["cache-control"] == "no-store"
    assert response.headers["pragma"] == "no-cache"


async def test_large_response_is_gzipped_when_asked(runtime, client):
    _, headers = await logged_in_user(runtime, client)
    for number in range(12):
        await make_controller(runtime, f"SN{number:03d}", owner="ana@example.com", name="n" * 40)
    async with client.stream(
        "GET", "/v1/controllers", headers={**headers, "Accept-Encoding": "gzip"}
    ) as response:
        raw = b"".join([chunk async for chunk in response.aiter_raw()])
    assert response.status_code == 200
    assert response.headers["content-encoding"] == "gzip"
    plain = gzip.decompress(raw)
    assert len(plain) > 1024
    assert len(raw) < len(plain)
    assert len(json.loads(plain)["_embedded"]["controller"]) == 12


async def test_large_response_is_plain_without_accept_encoding(runtime, client):
    _, headers = await logged_in_user(runtime, client)
    for number in range(12):
        await make_controller(runtime, f"SN{number:03d}", owner="ana@example.com", name="n" * 40)
    async with client.stream(
        "GET", "/v1/controllers", headers={**headers, "Accept-Encoding": "identity"}
    ) as response:
        raw = b"".join([chunk async for chunk in response.aiter_raw()])
    assert "content-encoding" not in response.headers
    assert len(raw) > 1024
    assert len(json.loads(raw)["_embedded"]["controller"]) == 12


async def test_small_response_is_not_gzipped(runtime, client):
    _, headers = await logged_in_user(runtime, client)
    response = await client.get("/v1/users/me", headers={**headers, "Accept-Encoding": "gzip"})
    assert response.status_code == 200
    assert len(response.content) < 1024
    assert "content-encoding" not in response.headers


def _login_body_of_size(size: int) -> bytes:
    """A valid login body padded (with an ignored extra field) to exactly ``size`` bytes."""
    empty = json.dumps({**LOGIN, "padding": ""}).encode()
    body = json.dumps({**LOGIN, "padding": "x" * (size - len(empty))}).encode()
    assert len(body) == size
    return body


async def test_body_of_exactly_64_kib_is_accepted(runtime, client):
    await logged_in_user(runtime, client)
    response = await client.post(
        "/v1/auth/login", content=_login_body_of_size(64 * 1024), headers=JSON_TYPE
    )
    assert response.status_code == 200, response.text


@pytest.mark.parametrize("path", ["/v1/auth/login", "/auth/renew"])
async def test_token_body_over_64_kib_is_413(runtime, client, path):
    await logged_in_user(runtime, client)
    response = await client.post(
        path, content=_login_body_of_size(64 * 1024 + 1), headers=JSON_TYPE
    )
    assert_problem(response, 413)
    assert response.headers["cache-control"] == "no-store"
    assert response.headers["pragma"] == "no-cache"


async def test_controller_body_over_64_kib_is_413(runtime, client):
    _, headers = await logged_in_user(runtime, client)
    await make_controller(runtime, "FREE1")
    body = json.dumps({"claim_code": "x" * 70_000}).encode()
    response = await client.post(
        "/v1/controllers/FREE1/assign", content=body, headers={**headers, **JSON_TYPE}
    )
    assert_problem(response, 413)
    mine = await client.get("/v1/controllers/FREE1", headers=headers)
    assert mine.status_code == 404  # not assigned


async def test_streamed_body_over_64_kib_without_length_is_413(runtime, client):
    """A chunked body (no Content-Length) is cut off at 64 KiB too."""
    await logged_in_user(runtime, client)
    chunks = [b"x" * 1024] * 70
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        if chunks:
            return {"type": "http.request", "body": chunks.pop(), "more_body": bool(chunks)}
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v1/auth/login",
        "raw_path": b"/v1/auth/login",
        "root_path": "",
        "query_string": b"",
        "headers": [(b"host", b"testserver"), (b"content-type", b"application/json")],
        "client": ("127.0.0.1", 50000),
        "server": ("testserver", 80),
        "state": {},
    }
    await client.app(scope, receive, send)
    start = next(m for m in sent if m["type"] == "http.response.start")
    assert start["status"] == 413
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    assert json.loads(body)["status"] == 413
