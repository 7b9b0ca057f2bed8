"""POST /controllers/{serial_number}/assign: claiming an unowned controller."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tests.conftest import SQLITE_ENOUGH
from tests.controllers.helpers import (
    RECORD_FIELDS,
    TIMESTAMP,
    active_rows,
    assert_problem,
    assignment_rows,
    controller_row,
)
from tests.factories import logged_in_user, make_controller

pytestmark = SQLITE_ENOUGH

ANA = "ana@example.com"
BOB = "bob@example.com"


def assign_url(serial: str) -> str:
    return f"/v1/controllers/{serial}/assign"


def near_now(timestamp: str) -> bool:
    moment = datetime.strptime(timestamp, "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC)
    return abs(datetime.now(UTC) - moment) < timedelta(minutes=1)


async def test_assign_unowned_returns_a_new_active_record(runtime, client):
    user_id, ana = await logged_in_user(runtime, client, ANA)
    await make_controller(
        runtime, "FREE01", mac="0011223344AA", type="vicki", name="Porch",
        firmware_version="3.1", device_group="outdoor",
    )  # fmt: skip
    response = await client.post(assign_url("FREE01"), headers=ana, json={})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/hal+json")
    body = response.json()
    assert body["_links"] == {"self": {"href": "/v1/controllers/FREE01/assign"}}
    record = body["controller_reassign"]
    assert set(record) == RECORD_FIELDS
    [stored] = await assignment_rows(runtime, "FREE01")
    assert record == {
        "id": stored.id, "user_id": user_id, "serial_number": "FREE01",
        "mac": "0011223344AA", "firmware_version": "3.1", "name": "Porch", "type": "vicki",
        "device_group": "outdoor", "status_push": 0, "room_id": None,
        "created": record["created"], "assigned_at": record["assigned_at"], "deleted_at": None,
    }  # fmt: skip
    for stamp in (record["created"], record["assigned_at"]):
        assert TIMESTAMP.match(stamp) and near_now(stamp), stamp
    assert (await controller_row(runtime, "FREE01")).user_id == user_id


@pytest.mark.parametrize(
    "request_kwargs",
    [
        {"json": {}},
        {"content": b"", "headers": {"Content-Type": "application/json"}},
        {"content": b""},
        {"content": b"", "headers": {"Content-Type": "text/plain"}},
        {"content": b'{"ignored": 1}', "headers": {"Content-Type": "application/json"}},
    ],
    ids=["json-object", "empty-json", "no-body-no-content-type", "empty-text", "extra-field"],
)
async def test_assign_accepts_an_empty_or_missing_body(runtime, client, request_kwargs):
    user_id, ana = await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, "FREE01")
    kwargs = dict(request_kwargs)
    headers = {**ana, **kwargs.pop("headers", {})}
    response = await client.post(assign_url("FREE01"), headers=headers, **kwargs)
    assert response.status_code == 200, response.text
    assert response.json()["controller_reassign"]["user_id"] == user_id


async def test_assign_already_mine_returns_the_same_record_and_changes_nothing(runtime, client):
    _, ana = await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, "FREE01")
    first = (await client.post(assign_url("FREE01"), headers=ana)).json()
    before = await assignment_rows(runtime, "FREE01")
    again = await client.post(assign_url("FREE01"), headers=ana, json={})
    assert again.status_code == 200
    assert again.json() == first
    assert await assignment_rows(runtime, "FREE01") == before
    assert len(before) == 1 and before[0].deleted_at is None


async def test_assign_of_a_controller_provisioned_to_me_returns_its_record(runtime, client):
    _, ana = await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, "MINE01", owner=ANA, room_id=5)
    [record] = await assignment_rows(runtime, "MINE01")
    response = await client.post(assign_url("MINE01"), headers=ana)
    assert response.status_code == 200
    assert response.json()["controller_reassign"]["id"] == record.id
    assert await assignment_rows(runtime, "MINE01") == [record]
    assert (await controller_row(runtime, "MINE01")).room_id == 5


async def test_assign_owned_by_other_is_409_and_ownership_stays(runtime, client):
    _, ana = await logged_in_user(runtime, client, ANA)
    bob_id, _ = await logged_in_user(runtime, client, BOB)
    await make_controller(runtime, "BOB001", owner=BOB)
    before = await assignment_rows(runtime, "BOB001")
    assert_problem(await client.post(assign_url("BOB001"), headers=ana), 409)
    assert (await controller_row(runtime, "BOB001")).user_id == bob_id
    assert await assignment_rows(runtime, "BOB001") == before


@pytest.mark.parametrize("serial", ["NOPE01", "nope-é", "AB%20C", "A" * 65])
async def test_assign_unknown_or_invalid_serial_is_404(runtime, client, serial):
    _, ana = await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, "FREE01")
    assert_problem(await client.post(assign_url(serial), headers=ana), 404)


async def test_assign_matches_the_serial_number_case_sensitively(runtime, client):
    _, ana = await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, "free01")
    assert_problem(await client.post(assign_url("FREE01"), headers=ana), 404)
    assert (await controller_row(runtime, "free01")).user_id is None


@pytest.mark.parametrize(
    "body", [None, {}, {"claim_code": "wrong"}, {"claim_code": ""}, {"claim_code": "SECRET "}]
)
async def test_assign_with_missing_or_wrong_claim_code_is_403(runtime, client, body):
    _, ana = await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, "CODE01", claim_code="SECRET")
    kwargs = {} if body is None else {"json": body}
    assert_problem(await client.post(assign_url("CODE01"), headers=ana, **kwargs), 403)
    assert (await controller_row(runtime, "CODE01")).user_id is None
    assert await assignment_rows(runtime, "CODE01") == []


async def test_assign_with_the_right_claim_code_is_200(runtime, client):
    user_id, ana = await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, "CODE01", claim_code="SECRET")
    response = await client.post(assign_url("CODE01"), headers=ana, json={"claim_code": "SECRET"})
    assert response.status_code == 200, response.text
    assert response.json()["controller_reassign"]["user_id"] == user_id
    assert [r.user_id for r in await active_rows(runtime, "CODE01")] == [user_id]


async def test_assign_claim_code_that_is_not_a_string_is_400_not_5xx(runtime, client):
    _, ana = await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, "CODE01", claim_code="1234")
    response = await client.post(assign_url("CODE01"), headers=ana, json={"claim_code": 1234})
    assert_problem(response, 400, "claim_code")
    assert (await controller_row(runtime, "CODE01")).user_id is None


@pytest.mark.parametrize(
    ("content_type", "content"),
    [
        ("application/x-www-form-urlencoded", b"claim_code=x"),
        ("text/plain", b"{}"),
        ("application/xml", b"<assign/>"),
    ],
)
async def test_assign_with_a_non_json_body_is_415(runtime, client, content_type, content):
    _, ana = await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, "FREE01")
    headers = {**ana, "Content-Type": content_type}
    response = await client.post(assign_url("FREE01"), headers=headers, content=content)
    assert_problem(response, 415)
    assert (await controller_row(runtime, "FREE01")).user_id is None


@pytest.mark.parametrize("content", [b"[]", b'"x"', b"{not json", b"null"])
async def test_assign_with_a_json_body_that_is_not_an_object_is_400(runtime, client, content):
    _, ana = await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, "FREE01")
    headers = {**ana, "Content-Type": "application/json"}
    response = await client.post(assign_url("FREE01"), headers=headers, content=content)
    assert_problem(response, 400)
    assert (await controller_row(runtime, "FREE01")).user_id is None


async def test_assigned_controller_then_shows_in_my_list_and_reads(runtime, client):
    user_id, ana = await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, "FREE01")
    assert (await client.get("/v1/controllers", headers=ana)).json()["total"] == 0
    await client.post(assign_url("FREE01"), headers=ana)
    listed = (await client.get("/v1/controllers", headers=ana)).json()
    assert [c["serial_number"] for c in listed["_embedded"]["controller"]] == ["FREE01"]
    read = await client.get("/v1/controllers/FREE01", headers=ana)
    assert read.json()["controller"]["user_id"] == user_id


async def test_assign_without_a_token_is_401_and_claims_nothing(runtime, client):
    await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, "FREE01")
    assert_problem(await client.post(assign_url("FREE01")), 401)
    assert (await controller_row(runtime, "FREE01")).user_id is None
