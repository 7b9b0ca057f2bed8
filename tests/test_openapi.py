"""The OpenAPI document describes the real API: paths, bodies, errors, headers, security.

Fast, in-process checks of the served document (``GET /openapi.json``) and of a few real
responses against it; tests/e2e/test_schemathesis.py fuzzes a real server with it.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import httpx
import msgspec
import pytest
import schemathesis
from litestar.routes import HTTPRoute
from litestar.testing import AsyncTestClient

from devicecontrol.app import create_app
from devicecontrol.config import Settings
from devicecontrol.http.openapi import served_document
from tests.apps import lent_client
from tests.devices.helpers import make_commands, report
from tests.factories import (
    CLIENT_ID,
    CLIENT_SECRET,
    bearer,
    logged_in_user,
    make_controller,
    make_user,
)

PROBLEM = "application/problem+json"
HAL = "application/hal+json"
JSON = "application/json"
FORM = "application/x-www-form-urlencoded"
SN = "/v1/controllers/{serial_number}"
COMMANDS = f"{SN}/commands"
GEOFENCE = "/v1/geofences/{geofence_id}"
SCHEDULE = "/v1/schedules/{serial_number}/{schedule_id}"
# every status each operation can answer (contract §1, §2, §4, §7, §8, §10)
EXPECTED_STATUSES = {
    ("post", "/v1/auth/login"): {200, 400, 401, 413, 415, 429, 503},
    ("post", "/v1/auth/renew"): {200, 400, 401, 413, 415, 429, 503},
    ("post", "/v1/auth/revoke"): {200, 400, 401, 413, 415, 429, 503},
    ("get", "/v1/users/me"): {200, 401, 503},
    ("get", "/v1/controllers"): {200, 400, 401, 503},
    ("get", SN): {200, 401, 404, 503},
    ("post", f"{SN}/assign"): {200, 400, 401, 403, 404, 409, 413, 415, 429, 503},
    ("delete", f"{SN}/assign"): {200, 401, 404, 503},
    ("patch", f"{SN}/reassign"): {200, 400, 401, 404, 409, 413, 415, 422, 503},
    ("get", f"{SN}/assignments"): {200, 400, 401, 404, 503},
    ("post", "/v1/provider/send"): {200, 400, 401, 404, 413, 415, 429, 503},
    ("post", "/v1/provider/fetch"): {200, 400, 401, 404, 413, 415, 503},
    ("post", COMMANDS): {201, 400, 401, 404, 413, 415, 429, 503},
    ("get", COMMANDS): {200, 400, 401, 404, 503},
    ("get", f"{COMMANDS}/{{command_id}}"): {200, 401, 404, 503},
    ("get", f"{SN}/readings"): {200, 400, 401, 404, 503},
    ("get", f"{SN}/readings/summary"): {200, 400, 401, 404, 503},
    ("get", "/v1/controllers/events"): {200, 401, 429, 503},
    ("get", f"{SN}/events"): {200, 401, 404, 429, 503},
    # contract §12
    ("get", "/v1/geofences"): {200, 400, 401, 503},
    ("post", "/v1/geofences"): {201, 400, 401, 404, 413, 415, 503},
    ("get", GEOFENCE): {200, 401, 404, 503},
    ("patch", GEOFENCE): {200, 400, 401, 404, 413, 415, 503},
    ("delete", GEOFENCE): {200, 401, 404, 503},
    ("post", f"{GEOFENCE}/location"): {200, 400, 401, 404, 413, 415, 429, 503},
    ("post", f"{GEOFENCE}/enter"): {201, 401, 404, 429, 503},
    ("post", f"{GEOFENCE}/exit"): {201, 401, 404, 429, 503},
    ("post", "/v1/schedules"): {201, 400, 401, 404, 413, 415, 503},
    ("get", "/v1/schedules"): {200, 400, 401, 503},
    ("get", "/v1/schedules/{serial_number}"): {200, 400, 401, 404, 503},
    ("get", SCHEDULE): {200, 401, 404, 503},
    ("patch", SCHEDULE): {200, 400, 401, 404, 413, 415, 503},
    ("delete", SCHEDULE): {200, 401, 404, 503},
}
# the success is 201, with Location (when a geofence fires nothing, no command is made and
# the enter/exit answer has none: documented as not required there)
CREATED = {("post", COMMANDS), ("post", "/v1/geofences"), ("post", "/v1/schedules")}
CREATED_MAYBE_LOCATED = {("post", f"{GEOFENCE}/enter"), ("post", f"{GEOFENCE}/exit")}
TOKEN_FIELDS = {
    "/v1/auth/login": ({"client_id", "client_secret", "username", "password"}, set()),
    "/v1/auth/renew": ({"client_id", "client_secret", "refresh_token"}, set()),
    "/v1/auth/revoke": ({"client_id", "client_secret", "token"}, {"token_type_hint"}),
}
METHODS = {"get", "put", "post", "delete", "patch", "head", "options", "trace"}


@pytest.fixture(scope="module")
def document(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The served document (``GET /openapi.json``'s bytes), built once for the module's
    checks of the document alone: it is the same on every backend, and building it makes
    no query (a client and a database per check cost about a second each)."""
    unused = tmp_path_factory.mktemp("openapi") / "never-opened.db"
    app = create_app(Settings(database_url=f"sqlite:///{unused}"))
    try:
        return msgspec.json.decode(served_document(app))
    finally:
        asyncio.run(app.state.runtime.close())


async def fetch_document(client: AsyncTestClient) -> dict[str, Any]:
    response = await client.get("/openapi.json")
    assert response.status_code == 200, response.text
    return response.json()


def operations(document: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {
        (method, path): operation
        for path, item in document["paths"].items()
        for method, operation in item.items()
        if method in METHODS
    }


def resolve(document: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = document["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    return schema


async def test_the_document_and_swagger_ui_need_no_token_and_the_api_still_does(client):
    served = await client.get("/openapi.json")
    assert served.status_code == 200
    assert served.headers["content-type"].startswith("application/vnd.oai.openapi+json")
    assert served.json()["openapi"].startswith("3.1")
    docs_copy = await client.get("/docs/openapi.json")
    assert docs_copy.status_code == 200 and docs_copy.json() == served.json()
    ui = await client.get("/docs")
    assert ui.status_code == 200 and ui.headers["content-type"].startswith("text/html")
    # Swagger UI loads the document from its URL: the page stays small and carries none
    assert 'url: "/docs/openapi.json"' in ui.text and len(ui.content) < 10 * 1024
    for path in ("/v1/users/me", "/users/me", "/v1/controllers"):
        unauthenticated = await client.get(path)
        assert unauthenticated.status_code == 401, path
        assert unauthenticated.headers["content-type"].startswith(PROBLEM)


async def test_the_document_itself_is_no_documented_operation(client):
    paths = (await fetch_document(client))["paths"]
    assert not [p for p in paths if "openapi" in p or p.startswith("/docs")]


async def test_every_route_is_documented_once_under_v1_without_unprefixed_twins(client):
    document = await fetch_document(client)
    documented = {
        path: {m for m in item if m in METHODS} for path, item in document["paths"].items()
    }
    routes = {r.path_format: r for r in client.app.routes if isinstance(r, HTTPRoute)}

    def schema_methods(route: HTTPRoute) -> set[str]:
        return {
            method.lower()
            for method, (handler, _) in route.route_handler_map.items()
            if handler.resolve_include_in_schema() and method not in ("OPTIONS", "HEAD")
        }

    assert documented == {p: schema_methods(r) for p, r in routes.items() if schema_methods(r)}
    v1_routes = [p for p in routes if p.startswith("/v1/")]
    assert {p for p in documented if p.startswith("/v1/")} == set(v1_routes)
    # every /v1 route's unprefixed twin answers as it does (contract §1): the same status,
    # body and allowed methods for the same request, and is documented once, under /v1
    for path in v1_routes:
        twin = path.removeprefix("/v1")
        assert twin not in documented, f"{twin} is documented once, as {path}"
        concrete = re.sub(r"\{[a-z_]+(?::[a-z]+)?\}", "PLUG-1", path)
        for method in sorted(routes[path].methods - {"HEAD", "OPTIONS"}):
            prefixed = await client.request(method, concrete)
            unprefixed = await client.request(method, concrete.removeprefix("/v1"))
            assert unprefixed.status_code == prefixed.status_code, (method, twin)
            assert unprefixed.content == prefixed.content, (method, twin)
    assert set(EXPECTED_STATUSES) == set(operations(document))


@pytest.mark.parametrize(("method", "path"), sorted(EXPECTED_STATUSES))
def test_each_operation_documents_hal_success_and_problem_errors(document, method, path):
    operation = operations(document)[(method, path)]
    responses = {int(status): response for status, response in operation["responses"].items()}
    assert set(responses) == EXPECTED_STATUSES[(method, path)]
    success = 201 if (method, path) in CREATED | CREATED_MAYBE_LOCATED else 200
    streams = path.endswith("/events")  # contract §11: Server-Sent Events
    expected = {"text/event-stream"} if streams else {HAL}
    if path.endswith("/readings"):  # contract §10: the readings as CSV, on request
        expected.add("text/csv")
    assert set(responses[success]["content"]) == expected
    if success == 201:
        located = (method, path) in CREATED
        assert responses[201]["headers"]["Location"]["required"] is located
    for status, response in responses.items():
        if status == success:
            continue
        assert set(response["content"]) == {PROBLEM}, status
        problem = resolve(document, response["content"][PROBLEM]["schema"])
        assert {"type", "title", "status", "detail"} <= set(problem["required"]), status
        assert problem["properties"]["errors"], status
        assert response["description"], status
        headers = response.get("headers", {})
        if status == 401:
            assert headers["WWW-Authenticate"]["required"] is True
        if status in (429, 503):
            assert headers["Retry-After"]["required"] is True
            assert headers["Retry-After"]["schema"] == {"type": "integer", "minimum": 1}


def test_the_problem_schema_is_rfc_9457_with_field_errors_and_oauth_codes(document):
    schemas = document["components"]["schemas"]
    problem = schemas["Problem"]
    assert problem["properties"]["type"]["const"] == "about:blank"
    assert problem["properties"]["status"]["minimum"] == 400
    errors = problem["properties"]["errors"]["oneOf"][0]
    assert errors["type"] == "array"
    assert resolve({"components": {"schemas": schemas}}, errors["items"])["required"] == [
        "field",
        "message",
    ]
    oauth = schemas["OAuthProblem"]
    assert "error" in oauth["required"]
    assert set(oauth["properties"]["error"]["enum"]) == {
        "invalid_request",
        "invalid_client",
        "invalid_grant",
    }


@pytest.mark.parametrize("path", sorted(TOKEN_FIELDS))
def test_token_endpoints_document_json_and_form_bodies_and_client_auth(document, path):
    operation = document["paths"][path]["post"]
    body = operation["requestBody"]
    assert body["required"] is True
    assert set(body["content"]) == {JSON, FORM}
    required, optional = TOKEN_FIELDS[path]
    for media_type, content in body["content"].items():
        schema = content["schema"]
        assert set(schema["required"]) == required, media_type
        assert set(schema["properties"]) == required | optional, media_type
        for name in required:
            field = schema["properties"][name]
            assert (field["type"], field["minLength"], field["maxLength"]) == ("string", 1, 1024)
    # a form field is a string sent once; unknown JSON fields (grant_type) are ignored
    assert body["content"][FORM]["schema"]["additionalProperties"] == {"type": "string"}
    assert "additionalProperties" not in body["content"][JSON]["schema"]
    assert operation["security"] == [{"clientBasic": []}, {}]
    schemes = document["components"]["securitySchemes"]
    assert schemes["clientBasic"] == {**schemes["clientBasic"], "type": "http", "scheme": "basic"}
    for status, response in operation["responses"].items():
        headers = response["headers"]
        assert headers["Cache-Control"]["schema"]["const"] == "no-store", status
        assert headers["Pragma"]["schema"]["const"] == "no-cache", status
    problems = {
        status: response["content"][PROBLEM]["schema"]["$ref"].rsplit("/", 1)[1]
        for status, response in operation["responses"].items()
        if PROBLEM in response["content"]
    }
    assert {status for status, name in problems.items() if name == "OAuthProblem"} == {"400", "401"}
    challenge = operation["responses"]["401"]["headers"]["WWW-Authenticate"]["schema"]
    assert challenge["const"] == 'Basic realm="devicecontrol"'


def test_protected_operations_need_a_bearer_token(document):
    assert document["components"]["securitySchemes"]["bearerToken"]["scheme"] == "bearer"
    for (_, path), operation in operations(document).items():
        if not path.startswith("/v1/auth/"):
            assert operation["security"] == [{"bearerToken": []}], path
            challenge = operation["responses"]["401"]["headers"]["WWW-Authenticate"]
            assert "realm" in challenge["schema"]["pattern"], path


def test_controller_bodies_path_and_query_parameters_are_documented(document):
    ops = operations(document)
    assign = ops[("post", f"{SN}/assign")]["requestBody"]
    assert assign["required"] is False and set(assign["content"]) == {JSON}
    assert set(assign["content"][JSON]["schema"]["properties"]) == {"claim_code"}
    reassign = ops[("patch", f"{SN}/reassign")]["requestBody"]
    owner_schema = reassign["content"][JSON]["schema"]
    assert reassign["required"] is True and owner_schema["required"] == ["owner"]
    assert owner_schema["properties"]["owner"]["format"] == "email"
    for (_, path), operation in ops.items():
        if "{serial_number}" in path:
            (serial,) = [p for p in operation["parameters"] if p["name"] == "serial_number"]
            assert serial["in"] == "path"
            assert serial["required"] is True
            assert serial["schema"]["pattern"] == "^[A-Za-z0-9_-]{1,64}$"
    for path in ("/v1/controllers", f"{SN}/assignments", COMMANDS, f"{SN}/readings"):
        query = {
            p["name"]: p["schema"] for p in ops[("get", path)]["parameters"] if p["in"] == "query"
        }
        assert query["page"]["type"] == "integer" and query["page"]["minimum"] == 1
        assert query["page_size"] == {
            "type": "integer",
            "minimum": 1,
            "maximum": 500,
            "default": 100,
        }
    listing = {p["name"]: p["schema"] for p in ops[("get", "/v1/controllers")]["parameters"]}
    assert (listing["type"]["type"], listing["mac"]["type"]) == ("string", "string")


def test_device_bodies_and_parameters_are_documented(document):
    ops = operations(document)
    send = ops[("post", "/v1/provider/send")]["requestBody"]["content"][JSON]["schema"]
    assert set(send["required"]) == {"serial_number", "command"}
    assert {"state", "mode", "temp", "fan", "time"} <= set(send["properties"])
    assert "additionalProperties" not in send  # fields a command does not take are ignored
    fetch = ops[("post", "/v1/provider/fetch")]["requestBody"]["content"][JSON]["schema"]
    assert fetch["required"] == ["serial_number"]
    native = ops[("post", COMMANDS)]["requestBody"]["content"][JSON]["schema"]
    assert native["required"] == ["name"] and native["additionalProperties"] is False
    assert set(native["properties"]) == {"name", "params", "ttl"}
    ttl = native["properties"]["ttl"]["anyOf"][0]
    assert (ttl["minimum"], ttl["maximum"]) == (1, 86400)
    query = {p["name"]: p["schema"] for p in ops[("post", COMMANDS)]["parameters"]}
    assert query["wait"] == {**query["wait"], "type": "integer", "minimum": 0, "maximum": 30}
    readings = {p["name"]: p["schema"] for p in ops[("get", f"{SN}/readings")]["parameters"]}
    for bound in ("since", "until"):
        assert readings[bound]["type"] == "string" and readings[bound]["pattern"], bound
    assert readings["format"]["enum"] == ["json", "csv"]
    summary = {p["name"]: p["schema"] for p in ops[("get", f"{SN}/readings/summary")]["parameters"]}
    assert summary["every"]["enum"] == ["1m", "5m", "15m", "1h", "1d"]
    assert summary["since"] == readings["since"] and summary["until"] == readings["until"]
    (command_id,) = [
        p for p in ops[("get", f"{COMMANDS}/{{command_id}}")]["parameters"]
        if p["name"] == "command_id"
    ]  # fmt: skip
    assert command_id["in"] == "path" and command_id["schema"]["pattern"]
    assert {tuple(o["tags"]) for (_, p), o in ops.items() if "provider" in p or "/comm" in p
            or "/readings" in p} == {("devices",)}  # fmt: skip


async def test_page_size_bounds_follow_the_configured_default_and_maximum(database_url):
    settings = Settings(database_url=database_url, default_page_size=2, max_page_size=3)
    async with lent_client(settings) as client:
        document = await fetch_document(client)
    parameters = document["paths"]["/v1/controllers"]["get"]["parameters"]
    (page_size,) = [p for p in parameters if p["name"] == "page_size"]
    assert page_size["schema"] == {"type": "integer", "minimum": 1, "maximum": 3, "default": 2}


# ------------------------------------------------------------------------------------------
# real responses against the document


class Documented:
    """Checks real responses against the served document, as schemathesis does."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.document = document
        self.schema = schemathesis.openapi.from_dict(document)

    def check(self, method: str, path: str, response: httpx.Response) -> None:
        operation = self.document["paths"][path][method]
        documented = operation["responses"].get(str(response.status_code))
        assert documented, f"{method} {path}: {response.status_code} is not documented"
        media_type = response.headers["content-type"].split(";")[0]
        assert media_type in documented["content"], (response.status_code, media_type)
        for name, header in documented.get("headers", {}).items():
            if header["required"]:
                assert name.lower() in response.headers, (response.status_code, name)
        self.schema[path][method.upper()].validate_response(response)


async def test_real_responses_match_the_document(runtime, client):
    documented = Documented(await fetch_document(client))
    _, headers = await logged_in_user(runtime, client)
    await make_user(runtime, "ben@example.com")
    await make_controller(runtime, "SN-MINE", owner="ana@example.com")
    await make_controller(runtime, "SN-BENS", owner="ben@example.com")
    await make_controller(runtime, "SN-CODE", claim_code="1234-ABCD")
    token_body = {"client_id": CLIENT_ID, "client_secret": CLIENT_SECRET}
    login = {**token_body, "username": "ana@example.com", "password": "wrong password"}
    cases = [
        ("post", "/v1/auth/login", await client.post("/v1/auth/login", data=login)),
        ("post", "/v1/auth/login", await client.post("/v1/auth/login", json={})),
        ("post", "/v1/auth/renew", await client.post("/v1/auth/renew", json={**token_body,
         "client_secret": "wrong secret 0123456789", "refresh_token": "x"})),
        ("post", "/v1/auth/revoke", await client.post("/v1/auth/revoke",
         json={**token_body, "token": "0" * 40})),
        ("post", "/v1/auth/revoke", await client.post("/v1/auth/revoke", content=b"token=1",
         headers={"Content-Type": "text/plain"})),
        ("get", "/v1/users/me", await client.get("/v1/users/me", headers=headers)),
        ("get", "/v1/users/me", await client.get("/v1/users/me",
         headers={**headers, "Accept-Response": "Advanced"})),
        ("get", "/v1/users/me", await client.get("/v1/users/me", headers=bearer("0" * 40))),
        ("get", "/v1/controllers", await client.get("/v1/controllers?page_size=1",
         headers=headers)),
        ("get", "/v1/controllers", await client.get("/v1/controllers?page=0", headers=headers)),
        ("get", "/v1/controllers", await client.get("/v1/controllers?page_size=null",
         headers=headers)),
        ("get", SN, await client.get("/v1/controllers/SN-MINE", headers=headers)),
        ("get", SN, await client.get("/v1/controllers/SN-BENS", headers=headers)),
        ("post", f"{SN}/assign", await client.post("/v1/controllers/SN-CODE/assign",
         headers=headers)),
        ("post", f"{SN}/assign", await client.post("/v1/controllers/SN-BENS/assign",
         headers=headers)),
        ("post", f"{SN}/assign", await client.post("/v1/controllers/SN-CODE/assign",
         json={"claim_code": "1234-ABCD"}, headers=headers)),
        ("post", f"{SN}/assign", await client.post("/v1/controllers/SN-MINE/assign",
         content=b"x" * (64 * 1024 + 1), headers={**headers, "Content-Type": JSON})),
        ("patch", f"{SN}/reassign", await client.patch("/v1/controllers/SN-MINE/reassign",
         json={"owner": "nobody@example.com"}, headers=headers)),
        ("patch", f"{SN}/reassign", await client.patch("/v1/controllers/SN-MINE/reassign",
         json={"owner": "not an address"}, headers=headers)),
        ("patch", f"{SN}/reassign", await client.patch("/v1/controllers/SN-MINE/reassign",
         json={"owner": "ben@example.com"}, headers=headers)),
        ("get", f"{SN}/assignments", await client.get("/v1/controllers/SN-CODE/assignments",
         headers=headers)),
        ("delete", f"{SN}/assign", await client.delete("/v1/controllers/SN-CODE/assign",
         headers=headers)),
        ("delete", f"{SN}/assign", await client.delete("/v1/controllers/SN-CODE/assign",
         headers=headers)),
    ]  # fmt: skip
    statuses = [response.status_code for _, _, response in cases]
    assert statuses == [400, 400, 401, 200, 415, 200, 200, 401, 200, 400, 400, 200, 404,
                        403, 409, 200, 413, 422, 400, 200, 200, 200, 404]  # fmt: skip
    for method, path, response in cases:
        documented.check(method, path, response)


async def test_the_server_rejects_what_the_document_rejects_and_no_more(runtime, client):
    """The fuzzer's findings: documented constraints and the server's checks agree."""
    _, headers = await logged_in_user(runtime, client)
    await make_controller(runtime, "SN-MINE", owner="ana@example.com")
    # page_size is an integer: "null" is no integer (Litestar used to read it as absent)
    null_size = await client.get("/v1/controllers?page_size=null", headers=headers)
    assert (null_size.status_code, null_size.json()["errors"][0]["field"]) == (400, "page_size")
    # the 400 of a too long filter names the parameter as sent, not the Python name
    long_type = await client.get("/v1/controllers", params={"type": "t" * 65}, headers=headers)
    assert (long_type.status_code, long_type.json()["errors"][0]["field"]) == (400, "type")
    # the documented mac pattern allows separators alone: nothing left to filter by
    separators = await client.get("/v1/controllers", params={"mac": "-:."}, headers=headers)
    assert separators.status_code == 200, separators.text
    assert [c["serial_number"] for c in separators.json()["_embedded"]["controller"]] == ["SN-MINE"]
    assert "mac" not in separators.json()["_links"]["self"]["href"]


async def test_real_device_responses_match_the_document(runtime, client, clock):
    documented = Documented(await fetch_document(client))
    user_id, headers = await logged_in_user(runtime, client)
    await make_controller(runtime, "MEL1", owner="ana@example.com", type="melissa")
    await make_controller(runtime, "PLUG1", owner="ana@example.com")
    await report(runtime, "MEL1", {"temp": 21.5, "humidity": 40.2, "online": True})
    await make_commands(runtime, user_id, "PLUG1", 100)
    ir = {
        "serial_number": "MEL1",
        "command": "send_ir_code",
        "state": 1,
        "mode": 3,
        "temp": 22.0,
        "fan": 2,
    }
    on = {"name": "switch_on_off", "params": {"state": "on"}}
    created = await client.post(
        "/v1/controllers/MEL1/commands?wait=0", json={"name": "turn_led_off"}, headers=headers
    )
    command = f"/v1/controllers/MEL1/commands/{created.json()['command']['id']}"
    clock.advance(301)  # the 100 expire: shown as such
    cases = [
        ("post", COMMANDS, created),
        ("get", SN, await client.get("/v1/controllers/MEL1", headers=headers)),
        ("get", SN, await client.get("/v1/controllers/PLUG1", headers=headers)),
        ("get", "/v1/controllers", await client.get("/v1/controllers", headers=headers)),
        ("post", "/v1/provider/send", await client.post("/v1/provider/send", json=ir,
         headers=headers)),
        ("post", "/v1/provider/send", await client.post("/v1/provider/send",
         json={**ir, "temp": 40}, headers=headers)),
        ("post", "/v1/provider/send", await client.post("/v1/provider/send",
         json={**ir, "serial_number": "NOPE"}, headers=headers)),
        ("post", "/v1/provider/fetch", await client.post("/v1/provider/fetch",
         json={"serial_number": "MEL1"}, headers=headers)),
        ("post", "/v1/provider/fetch", await client.post("/v1/provider/fetch",
         json={"serial_number": "PLUG1"}, headers=headers)),
        ("post", "/v1/provider/fetch", await client.post("/v1/provider/fetch", content=b"x",
         headers={**headers, "Content-Type": "text/plain"})),
        ("post", COMMANDS, await client.post("/v1/controllers/PLUG1/commands", json=on,
         headers=headers)),
        ("post", COMMANDS, await client.post("/v1/controllers/PLUG1/commands?wait=31",
         json=on, headers=headers)),
        ("get", COMMANDS, await client.get("/v1/controllers/PLUG1/commands?page_size=2",
         headers=headers)),
        ("get", f"{COMMANDS}/{{command_id}}", await client.get(command, headers=headers)),
        ("get", f"{COMMANDS}/{{command_id}}", await client.get(command + "0",
         headers=headers)),
        ("get", f"{SN}/readings", await client.get("/v1/controllers/MEL1/readings",
         headers=headers)),
        ("get", f"{SN}/readings", await client.get("/v1/controllers/MEL1/readings?until=x",
         headers=headers)),
    ]  # fmt: skip
    statuses = [response.status_code for _, _, response in cases]
    assert statuses == [201, 200, 200, 200, 200, 400, 404, 200, 200, 415, 201, 400, 200,
                        200, 404, 200, 400]  # fmt: skip
    for method, path, response in cases:
        documented.check(method, path, response)
    await make_commands(runtime, user_id, "PLUG1", 99)
    too_many = await client.post("/v1/controllers/PLUG1/commands", json=on, headers=headers)
    assert too_many.status_code == 429
    documented.check("post", COMMANDS, too_many)
