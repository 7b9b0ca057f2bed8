"""Contract §1 (body shape) and §7 (generic errors): problem+json, 400, 404, 405, no leaks."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import SQLITE_ENOUGH
from tests.factories import logged_in_user, make_controller
from tests.test_transport import PROBLEM, assert_problem

pytestmark = SQLITE_ENOUGH

JSON_TYPE = {"Content-Type": "application/json"}
NOT_OBJECTS = [b"[]", b'[{"owner": "bob@example.com"}]', b'"text"', b"42", b"true", b"null"]
NOT_JSON = [
    b"{",
    b"{'owner': 'x'}",
    b'{"owner": }',
    b"\xff\xfe{}",
    b"owner=bob",
    b'{"owner": "\xc3\x28@b.example"}',  # not UTF-8 inside a string
]
LEAK_MARKERS = ("Traceback", 'File "', "SELECT ", "INSERT ", "sqlalchemy", "asyncpg", "sqlite3")


def assert_no_leak(response: Any) -> None:
    assert response.status_code < 500, response.text
    for marker in LEAK_MARKERS:
        assert marker.lower() not in response.text.lower(), (marker, response.text)


@pytest.mark.parametrize("body", NOT_OBJECTS)
async def test_json_body_that_is_not_an_object_is_400(runtime, client, body):
    _, headers = await logged_in_user(runtime, client)
    await make_controller(runtime, "MINE1", owner="ana@example.com")
    await make_controller(runtime, "FREE1")
    typed = {**headers, **JSON_TYPE}
    reassign = await client.patch("/v1/controllers/MINE1/reassign", content=body, headers=typed)
    assert_problem(reassign, 400)
    assign = await client.post("/v1/controllers/FREE1/assign", content=body, headers=typed)
    assert_problem(assign, 400)
    login = await client.post("/v1/auth/login", content=body, headers=JSON_TYPE)
    assert assert_problem(login, 400)["error"] == "invalid_request"


@pytest.mark.parametrize("body", NOT_JSON)
async def test_invalid_json_body_is_400(runtime, client, body):
    _, headers = await logged_in_user(runtime, client)
    await make_controller(runtime, "MINE1", owner="ana@example.com")
    reassign = await client.patch(
        "/v1/controllers/MINE1/reassign", content=body, headers={**headers, **JSON_TYPE}
    )
    assert_problem(reassign, 400)
    assert_no_leak(reassign)
    login = await client.post("/v1/auth/renew", content=body, headers=JSON_TYPE)
    assert assert_problem(login, 400)["error"] == "invalid_request"


@pytest.mark.parametrize(
    "path", ["/v1/nothing", "/nothing", "/v2/users/me", "/v1", "/v1/users", "/v1/auth/logout"]
)
async def test_unknown_path_is_404_problem(runtime, client, path):
    _, headers = await logged_in_user(runtime, client)
    response = await client.get(path, headers=headers)
    assert_problem(response, 404)


async def test_unknown_path_is_404_even_without_a_token(client):
    response = await client.post("/v1/no/such/thing", json={})
    assert_problem(response, 404)


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("GET", "/v1/auth/login", "POST"),
        ("PUT", "/auth/renew", "POST"),
        ("DELETE", "/v1/users/me", "GET"),
        ("POST", "/users/me", "GET"),
        ("PUT", "/v1/controllers/ABC", "GET"),
        ("GET", "/v1/controllers/ABC/assign", "POST"),
        ("POST", "/controllers/ABC/reassign", "PATCH"),
    ],
)
async def test_wrong_method_is_405_with_allow(runtime, client, method, path, allowed):
    _, headers = await logged_in_user(runtime, client)
    response = await client.request(method, path, headers=headers)
    assert_problem(response, 405)
    allow = {m.strip() for m in response.headers["allow"].split(",")}
    assert allowed in allow
    assert method not in allow


async def test_error_bodies_are_problem_details(runtime, client):
    """One of each kind: 401, 404 of a resource, 400 validation, 415."""
    _, headers = await logged_in_user(runtime, client)
    unauthenticated = await client.get("/v1/users/me")
    assert assert_problem(unauthenticated, 401)["title"] == "Unauthorized"
    missing = await client.get("/v1/controllers/NOPE", headers=headers)
    assert assert_problem(missing, 404)["title"] == "Not Found"
    invalid = await client.get("/v1/controllers?page=0", headers=headers)
    assert assert_problem(invalid, 400)["title"] == "Bad Request"
    unsupported = await client.post(
        "/v1/controllers/NOPE/assign", content=b"x", headers={**headers, "Content-Type": "text/x"}
    )
    assert assert_problem(unsupported, 415)["title"] == "Unsupported Media Type"


async def test_validation_error_lists_the_field(runtime, client):
    _, headers = await logged_in_user(runtime, client)
    await make_controller(runtime, "MINE1", owner="ana@example.com")
    response = await client.patch("/v1/controllers/MINE1/reassign", json={}, headers=headers)
    body = assert_problem(response, 400)
    assert [error["field"] for error in body["errors"]] == ["owner"]
    assert all(isinstance(error["message"], str) and error["message"] for error in body["errors"])


async def test_success_body_is_a_utf8_json_object(runtime, client):
    _, headers = await logged_in_user(runtime, client)
    response = await client.get("/v1/users/me", headers=headers)
    assert response.headers["content-type"] == "application/hal+json"
    assert isinstance(response.json(), dict)
    response.content.decode("utf-8")


HOSTILE_REQUESTS = [
    ("GET", "/v1/controllers/%00", None),
    ("GET", "/v1/controllers/%ED%A0%80", None),
    ("GET", "/v1/controllers/" + "A" * 5000, None),
    ("GET", "/v1/controllers?mac=%00", None),
    ("GET", "/v1/controllers?page=99999999999999999999", None),
    ("GET", "/v1/controllers?page_size=-1", None),
    ("GET", "/v1/controllers?page=abc", None),
    ("POST", "/v1/controllers/%00/assign", b'{"claim_code": "\\u0000"}'),
    ("POST", "/v1/controllers/FREE1/assign", b'{"claim_code": 12}'),
    ("POST", "/v1/controllers/FREE1/assign", b'{"claim_code": "\\ud800"}'),
    ("PATCH", "/v1/controllers/MINE1/reassign", b'{"owner": "a\\u0000@b.example"}'),
    ("PATCH", "/v1/controllers/MINE1/reassign", b'{"owner": ["x"]}'),
    ("PATCH", "/v1/controllers/MINE1/reassign", b'{"owner": "' + b"x" * 5000 + b'@b.example"}'),
    ("PATCH", "/v1/controllers/MINE1/reassign", b'{"owner": "\xc3\x28@b.example"}'),
    ("POST", "/v1/auth/login", b'{"client_id": "\\u0000", "client_secret": 1e999}'),
    ("POST", "/v1/auth/login", b'{"client_id": "test-app", "username": {"$ne": null}}'),
    ("POST", "/v1/auth/renew", b'{"client_id": "test-app", "refresh_token": "\' OR 1=1 --"}'),
]


@pytest.mark.parametrize(("method", "path", "body"), HOSTILE_REQUESTS)
async def test_hostile_input_is_never_a_500_nor_leaks_internals(
    runtime, client, method, path, body
):
    _, headers = await logged_in_user(runtime, client)
    await make_controller(runtime, "MINE1", owner="ana@example.com")
    await make_controller(runtime, "FREE1")
    response = await client.request(method, path, content=body, headers={**headers, **JSON_TYPE})
    assert_no_leak(response)
    if response.status_code >= 400:
        assert response.headers["content-type"] == PROBLEM


async def test_nul_in_type_filter_is_never_a_500(runtime, client):
    _, headers = await logged_in_user(runtime, client)
    response = await client.get("/v1/controllers?type=%00", headers=headers)
    assert_no_leak(response)
