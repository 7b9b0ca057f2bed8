"""Whatever a client sends to the geofence and schedule endpoints, the answer is a problem
or a success, never a 500 (contract §7); and nothing without a token."""

from __future__ import annotations

from tests.devices.helpers import ANA
from tests.factories import logged_in_user, make_controller

DEEP: dict = {}
for _ in range(200):
    DEEP = {"a": DEEP}
HOSTILE_VALUES = [
    None, True, -0.0, 1e308, -1e308, 10**400, -(10**30), "", "\x00", "x" * 5000, "💡",
    [], [1, 2], {}, {"state": "on", "\x00": 1}, DEEP, "07:00\x00", "1111111\x00",
    "Europe/Berlin\x00", "../../etc/passwd", '{"state": "on"}' * 300,
]  # fmt: skip
GEOFENCE_FIELDS = [
    "controller_id", "latitude", "longitude", "radius", "enter_command_name",
    "enter_command_fields", "exit_command_name", "exit_command_fields", "active", "enter_push",
]  # fmt: skip
SCHEDULE_FIELDS = [
    "controller_id", "days", "from_time", "to_time", "command_name", "command_fields",
    "end_command_name", "end_command_fields", "time_zone", "active",
]  # fmt: skip
GOOD_FENCE = {
    "controller_id": "PLUG1", "latitude": 1.0, "longitude": 2.0, "radius": 100,
    "enter_command_name": "switch_on_off", "enter_command_fields": {"state": "on"},
    "exit_command_name": "switch_on_off", "exit_command_fields": {"state": "off"},
}  # fmt: skip
GOOD_SCHEDULE = {
    "controller_id": "PLUG1", "days": "1111111", "from_time": "07:00",
    "command_name": "switch_on_off", "command_fields": {"state": "on"}, "time_zone": "UTC",
}  # fmt: skip


def assert_answered(response) -> None:
    assert response.status_code < 500, response.text
    if response.status_code >= 400:
        assert response.headers["content-type"].startswith("application/problem+json")


async def test_hostile_values_in_every_field_are_problems_never_500(runtime, client):
    _, ana = await logged_in_user(runtime, client, ANA)
    await make_controller(runtime, "PLUG1", owner=ANA, type="smart_plug")
    await make_controller(runtime, "ANY1", owner=ANA, type="thermostat")  # no catalogue
    fence = (await client.post("/v1/geofences", json=GOOD_FENCE, headers=ana)).json()
    schedule = (await client.post("/v1/schedules", json=GOOD_SCHEDULE, headers=ana)).json()
    fence_path = f"/v1/geofences/{fence['geofence']['id']}"
    schedule_path = f"/v1/schedules/PLUG1/{schedule['schedule']['id']}"
    any_type = {**GOOD_FENCE, "controller_id": "ANY1", "enter_command_name": "any",
                "exit_command_name": "any"}  # fmt: skip
    for value in HOSTILE_VALUES:
        for field in GEOFENCE_FIELDS:
            body = {**GOOD_FENCE, field: value}
            assert_answered(await client.post("/v1/geofences", json=body, headers=ana))
            assert_answered(await client.patch(fence_path, json={field: value}, headers=ana))
        for field in ("enter_command_fields", "exit_command_fields"):  # taken as they come
            body = {**any_type, field: value}
            assert_answered(await client.post("/v1/geofences", json=body, headers=ana))
        for field in ("latitude", "longitude"):
            body = {"latitude": 1.0, "longitude": 2.0, field: value}
            assert_answered(await client.post(f"{fence_path}/location", json=body, headers=ana))
        for field in SCHEDULE_FIELDS:
            body = {**GOOD_SCHEDULE, field: value}
            assert_answered(await client.post("/v1/schedules", json=body, headers=ana))
            assert_answered(await client.patch(schedule_path, json={field: value}, headers=ana))


HOSTILE_PATHS = [
    "/v1/geofences/1%00", "/v1/geofences/1;DROP", "/v1/geofences/%F0%9F%92%A1/enter",
    "/v1/schedules/PLUG1/1e3", "/v1/schedules/PL%00UG1", "/v1/schedules/x" * 3,
]  # fmt: skip


async def test_hostile_paths_are_404(runtime, client):
    _, ana = await logged_in_user(runtime, client, ANA)
    for path in HOSTILE_PATHS:
        for method in ("GET", "POST", "PATCH", "DELETE"):
            response = await client.request(method, path, headers=ana)
            assert response.status_code in (404, 405), (method, path, response.text)


async def test_every_automation_endpoint_needs_a_token(client):
    for method, path in [
        ("GET", "/v1/geofences"), ("POST", "/v1/geofences"), ("GET", "/geofences/1"),
        ("PATCH", "/v1/geofences/1"), ("DELETE", "/v1/geofences/1"),
        ("POST", "/v1/geofences/1/location"), ("POST", "/v1/geofences/1/enter"),
        ("POST", "/geofences/1/exit"), ("GET", "/v1/schedules"), ("POST", "/schedules"),
        ("GET", "/v1/schedules/SN1"), ("GET", "/v1/schedules/SN1/1"),
        ("PATCH", "/v1/schedules/SN1/1"), ("DELETE", "/schedules/SN1/1"),
    ]:  # fmt: skip
        response = await client.request(method, path)
        assert response.status_code == 401, (method, path)
        assert response.headers["www-authenticate"] == 'Bearer realm="devicecontrol"'
