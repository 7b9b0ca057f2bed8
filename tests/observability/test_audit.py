"""Audit lines: one per login, renew, revoke, ownership change, password change and disable."""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

import httpx
import pytest
from litestar.testing import AsyncTestClient

from devicecontrol.app import create_app
from devicecontrol.config import Settings, ThrottleRule
from devicecontrol.users import service as users_service
from tests.apps import lent_client
from tests.factories import (
    CLIENT_ID,
    CLIENT_SECRET,
    PASSWORD,
    bearer,
    logged_in_user,
    login,
    make_client,
    make_controller,
    make_user,
)
from tests.test_outage import UNREACHABLE

ANA = "ana@example.com"


@pytest.fixture
def audit(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.INFO, logger="devicecontrol")
    return caplog


def audit_lines(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    return [r.fields for r in caplog.records if r.name == "devicecontrol.audit"]


def everything_written(caplog: pytest.LogCaptureFixture) -> str:
    """Every captured record with all its attributes, the fields of structured ones included."""
    return " ".join(repr(record.__dict__) for record in caplog.records)


def only_line(caplog: pytest.LogCaptureFixture) -> dict[str, Any]:
    lines = audit_lines(caplog)
    assert len(lines) == 1, lines
    return lines[0]


async def token_request(client: httpx.AsyncClient, path: str, **fields: str) -> httpx.Response:
    body = {"client_id": CLIENT_ID, "client_secret": CLIENT_SECRET, **fields}
    return await client.post(f"/v1/auth/{path}", json=body)


async def test_a_login_is_audited_with_user_client_address_and_request_id(runtime, client, audit):
    await make_client(runtime)
    user_id = await make_user(runtime, ANA)
    response = await token_request(client, "login", username=ANA, password=PASSWORD)
    assert response.status_code == 200
    assert only_line(audit) == {
        "event": "login",
        "outcome": "success",
        "request_id": response.headers["x-request-id"],
        "user_id": user_id,
        "client_id": CLIENT_ID,
        "client_address": "testclient",
    }


async def test_a_wrong_password_is_a_failure_of_the_user_it_named(runtime, client, audit):
    await make_client(runtime)
    user_id = await make_user(runtime, ANA)
    response = await token_request(client, "login", username=ANA, password="wrong-pass-1")
    assert response.status_code == 400
    line = only_line(audit)
    assert (line["outcome"], line["reason"]) == ("failure", "invalid_grant")
    assert line["user_id"] == user_id


async def test_an_unknown_username_is_a_failure_that_does_not_write_the_name(
    runtime, client, audit
):
    await make_client(runtime)
    typed = "typed-my-password-into-username"
    response = await token_request(client, "login", username=typed, password="whatever-123")
    assert response.status_code == 400
    line = only_line(audit)
    assert (line["outcome"], line["user_id"]) == ("failure", None)
    assert typed not in everything_written(audit)


async def test_client_failures_write_only_a_client_id_that_exists(runtime, client, audit):
    await make_client(runtime)
    await make_user(runtime, ANA)
    wrong_secret = await token_request(
        client, "login", client_secret="wrong-secret-0000000", username=ANA, password=PASSWORD
    )
    unknown = await token_request(
        client, "login", client_id="no-such-client-id", username=ANA, password=PASSWORD
    )
    assert wrong_secret.status_code == unknown.status_code == 401
    first, second = audit_lines(audit)
    assert (first["reason"], first["client_id"]) == ("invalid_client", CLIENT_ID)
    assert (second["reason"], second["client_id"]) == ("invalid_client", None)
    assert "no-such-client-id" not in everything_written(audit)


async def test_a_throttled_login_is_a_failure_with_reason_too_many_requests(
    settings, runtime, audit
):
    await make_client(runtime)
    strict = replace(settings, throttle_login_per_username=ThrottleRule(1, 900))
    async with lent_client(strict) as client:
        for _ in range(2):
            await token_request(client, "login", username=ANA, password="wrong-pass-1")
    assert [line["reason"] for line in audit_lines(audit)] == ["invalid_grant", "too_many_requests"]


async def test_a_login_the_database_cannot_serve_is_an_error(audit):
    app = create_app(Settings(database_url=UNREACHABLE["sqlite"]))
    async with AsyncTestClient(app=app) as client:
        response = await token_request(client, "login", username=ANA, password=PASSWORD)
    assert response.status_code == 503
    line = only_line(audit)
    assert (line["event"], line["outcome"]) == ("login", "error")


async def test_renew_and_revoke_are_audited(runtime, client, audit):
    await make_client(runtime)
    user_id = await make_user(runtime, ANA)
    auth = await login(client, ANA)
    audit.clear()
    renewed = await token_request(client, "renew", refresh_token=auth["refresh_token"])
    refused = await token_request(client, "renew", refresh_token="f" * 40)
    revoked = await token_request(client, "revoke", token=auth["access_token"])
    assert (renewed.status_code, refused.status_code, revoked.status_code) == (200, 400, 200)
    renew, refusal, revoke = audit_lines(audit)
    assert renew == {
        "event": "renew",
        "outcome": "success",
        "request_id": renewed.headers["x-request-id"],
        "user_id": user_id,
        "client_id": CLIENT_ID,
    }
    assert (refusal["outcome"], refusal["reason"], refusal["user_id"]) == (
        "failure",
        "invalid_grant",
        None,
    )
    assert revoke == {
        "event": "revoke",
        "outcome": "success",
        "request_id": revoked.headers["x-request-id"],
        "client_id": CLIENT_ID,
    }


async def test_assign_reassign_and_release_are_audited_with_the_serial_number(
    runtime, client, audit
):
    user_id, headers = await logged_in_user(runtime, client)
    friend_id = await make_user(runtime, "friend@example.com")
    await make_controller(runtime, "SN-A-1", claim_code="CLAIM-A-1")
    await make_controller(runtime, "SN-A-2")
    audit.clear()
    base = "/v1/controllers"
    wrong = await client.post(f"{base}/SN-A-1/assign", headers=headers, json={"claim_code": "NO"})
    claimed = await client.post(
        f"{base}/SN-A-1/assign", headers=headers, json={"claim_code": "CLAIM-A-1"}
    )
    await client.post(f"{base}/SN-A-2/assign", headers=headers)
    moved = await client.patch(
        f"{base}/SN-A-1/reassign", headers=headers, json={"owner": "friend@example.com"}
    )
    released = await client.delete(f"{base}/SN-A-2/assign", headers=headers)
    malformed = await client.post(f"{base}/bad%20serial!/assign", headers=headers)
    assert (wrong.status_code, claimed.status_code) == (403, 200)
    assert (moved.status_code, released.status_code, malformed.status_code) == (200, 200, 404)
    lines = audit_lines(audit)
    summary = [(a["event"], a["outcome"], a["serial_number"], a.get("reason")) for a in lines]
    assert summary == [
        ("assign", "failure", "SN-A-1", "forbidden"),
        ("assign", "success", "SN-A-1", None),
        ("assign", "success", "SN-A-2", None),
        ("reassign", "success", "SN-A-1", None),
        ("release", "success", "SN-A-2", None),
        ("assign", "failure", None, "not_found"),
    ]
    assert {line["user_id"] for line in lines} == {user_id}
    assert lines[3]["new_owner_id"] == friend_id
    assert lines[1]["request_id"] == claimed.headers["x-request-id"]
    assert "CLAIM-A-1" not in everything_written(audit)


async def test_ownership_changes_name_only_serial_numbers_that_matched_a_controller(
    runtime, client, audit
):
    user_id, headers = await logged_in_user(runtime, client)
    await make_user(runtime, "friend@example.com")
    await make_controller(runtime, "SN-FRIENDS", owner="friend@example.com")
    audit.clear()
    base = "/v1/controllers"
    typed = "SN-TYPED-BUT-UNKNOWN"
    answers = [
        await client.post(f"{base}/{typed}/assign", headers=headers),
        await client.patch(
            f"{base}/{typed}/reassign", headers=headers, json={"owner": "friend@example.com"}
        ),
        await client.delete(f"{base}/{typed}/assign", headers=headers),
        # someone else's controller: to reassign and release it is "not yours", as unknown
        await client.patch(
            f"{base}/SN-FRIENDS/reassign", headers=headers, json={"owner": "friend@example.com"}
        ),
        await client.delete(f"{base}/SN-FRIENDS/assign", headers=headers),
        # a claim of it matched the controller (409 says it exists): that serial is written
        await client.post(f"{base}/SN-FRIENDS/assign", headers=headers),
    ]
    assert [a.status_code for a in answers] == [404, 404, 404, 404, 404, 409]
    summary = [(a["event"], a["outcome"], a["serial_number"]) for a in audit_lines(audit)]
    assert summary == [
        ("assign", "failure", None),
        ("reassign", "failure", None),
        ("release", "failure", None),
        ("reassign", "failure", None),
        ("release", "failure", None),
        ("assign", "failure", "SN-FRIENDS"),
    ]
    assert {line["user_id"] for line in audit_lines(audit)} == {user_id}
    assert typed not in repr(audit_lines(audit))


async def test_password_change_and_disable_are_audited_outside_any_request(runtime, audit):
    user_id = await make_user(runtime, ANA)
    await users_service.set_password(runtime, ANA, password="a-new-password-42")
    await users_service.disable_user(runtime, ANA)
    assert audit_lines(audit) == [
        {"event": "password_change", "outcome": "success", "request_id": None, "user_id": user_id},
        {"event": "user_disable", "outcome": "success", "request_id": None, "user_id": user_id},
    ]
    assert "a-new-password-42" not in everything_written(audit)


async def test_a_bearer_request_is_not_itself_audited(runtime, client, audit):
    _, headers = await logged_in_user(runtime, client)
    audit.clear()
    assert (await client.get("/v1/users/me", headers=headers)).status_code == 200
    assert (await client.get("/v1/controllers", headers=bearer("0" * 40))).status_code == 401
    assert audit_lines(audit) == []
