"""The app's pages in-process (SQLite: these rules do not touch the database's own
behaviour): every answer's security headers, errors in words, the routes kept out of
the OpenAPI document, the size budget of the app's JavaScript and CSS."""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path

import pytest
from sqlalchemy import insert, select

from devicecontrol.database.tables import controllers, geofences
from devicecontrol.demo import data as demo
from devicecontrol.webapp import headers as webapp_headers
from devicecontrol.webapp.chart import chart_series
from tests.asgi import app_and_client
from tests.devices.test_readings_order import SERIAL, store_out_of_arrival_order
from tests.factories import make_controller, make_user
from tests.webapp.support import HTMX, changed_with, log_in, text_of

SQLITE_ONLY = pytest.mark.parametrize("backend", ["sqlite"])
STATIC = Path(webapp_headers.__file__).parent / "static"
BUDGET_BYTES = 150 * 1024
README = Path(__file__).resolve().parents[2] / "README.md"
ANA, BEN = "ana@example.com", "ben@example.com"


def assert_page_headers(answer) -> None:
    policy = answer.headers.get("content-security-policy", "")
    assert "frame-ancestors 'none'" in policy, (answer.url, answer.headers)
    assert "script-src 'self'" in policy and "style-src 'self'" in policy
    assert "unsafe-inline" not in policy and "unsafe-eval" not in policy
    assert answer.headers["x-content-type-options"] == "nosniff"


@SQLITE_ONLY
async def test_every_answer_of_the_app_carries_its_security_headers(settings):
    async with app_and_client(settings) as (runtime, http):
        await make_user(runtime, ANA)
        await make_user(runtime, BEN)
        await make_controller(runtime, "BENS-1", owner=BEN)
        anonymous = ["/", "/app/", "/app/login", "/app/static/app.js", "/app/no/such"]
        answers = [await http.get(path) for path in anonymous]
        token = await log_in(http, ANA)
        for path in ("/app/", "/app/profile", "/app/controllers/BENS-1", "/app/x", "/app/login"):
            answers.append(await http.get(path))
        answers.append(await http.post("/app/claim", data={"serial_number": "X"}, headers=HTMX))
        answers.append(
            await http.post("/app/claim", data={"serial_number": "X"}, headers=changed_with(token))
        )
        assert {a.status_code for a in answers} >= {200, 302, 303, 403, 404}
        for answer in answers:
            assert_page_headers(answer)
            if "/app/static/" not in str(answer.url):
                assert answer.headers["cache-control"] == "no-store", answer.url
        api = await http.get("/v1/users/me")
        assert "content-security-policy" not in api.headers  # the API is no page


@SQLITE_ONLY
async def test_another_users_controller_and_an_unknown_page_are_not_found_in_words(settings):
    async with app_and_client(settings) as (runtime, http):
        await make_user(runtime, ANA)
        await make_user(runtime, BEN)
        await make_controller(runtime, "BENS-1", owner=BEN, name="Ben's plug")
        await log_in(http, ANA)
        others = await http.get("/app/controllers/BENS-1")
        assert others.status_code == 404
        assert others.headers["content-type"].startswith("text/html")
        assert "No controller with serial number BENS-1 is assigned to you." in others.text
        assert "Ben's plug" not in others.text and "Ben&#39;s plug" not in others.text
        unknown = await http.get("/app/no/such/page")
        assert unknown.status_code == 404
        assert "There is no such page" in unknown.text


@SQLITE_ONLY
async def test_claim_hand_over_and_release_keep_the_apis_rules(settings):
    async with app_and_client(settings) as (runtime, http):
        await make_user(runtime, ANA)
        await make_user(runtime, BEN)
        await make_controller(runtime, "CODED-1", claim_code="1234")
        token = await log_in(http, ANA)
        headers = changed_with(token)
        wrong = {"serial_number": "CODED-1", "claim_code": "9999"}
        refused = await http.post("/app/claim", data=wrong, headers=headers)
        assert refused.status_code == 403 and 'role="alert"' in refused.text
        right = {"serial_number": "CODED-1", "claim_code": "1234"}
        claimed = await http.post("/app/claim", data=right, headers=headers)
        assert claimed.status_code == 200 and "CODED-1 is yours now" in claimed.text
        again = await http.post("/app/claim", data=right, headers=headers)
        assert again.status_code == 200 and "CODED-1 is yours already" in again.text
        nobody = await http.post(
            "/app/controllers/CODED-1/handover",
            data={"owner": "nobody@example.com"},
            headers=headers,
        )
        assert nobody.status_code == 422 and "no active account is named" in nobody.text
        handed = await http.post(
            "/app/controllers/CODED-1/handover", data={"owner": BEN}, headers=headers
        )
        assert handed.headers["hx-redirect"] == "/app/"
        assert (await http.get("/app/controllers/CODED-1")).status_code == 404
        again = await http.post("/app/controllers/CODED-1/release", headers=headers)
        assert again.status_code == 404  # no longer Ana's to release


@SQLITE_ONLY
async def test_the_apps_routes_are_not_in_the_openapi_document(settings):
    async with app_and_client(settings) as (_, http):
        paths = (await http.get("/openapi.json")).json()["paths"]
    assert paths and not [p for p in paths if p == "/" or p.startswith("/app")]


def test_the_apps_javascript_and_css_fit_the_budget():
    files = [p for p in STATIC.rglob("*") if p.suffix in {".js", ".css"}]
    assert {p.name for p in files} >= {"app.js", "app.css", "htmx.min.js", "uPlot.iife.min.js"}
    assert sum(p.stat().st_size for p in files) <= BUDGET_BYTES


@SQLITE_ONLY
async def test_the_readmes_web_app_line_logs_the_demo_user_in(settings):
    """The line names the demo's own credentials (the README's curl walk-through logs in
    with them against ``serve --demo``: tests/e2e/test_readme_walkthrough.py), and they
    open the app."""
    assert demo.web_app_line() in README.read_text(encoding="utf-8")
    async with app_and_client(settings) as (runtime, http):
        await make_user(runtime, demo.DEMO_USER, password=demo.DEMO_PASSWORD)
        await log_in(http, demo.DEMO_USER, demo.DEMO_PASSWORD)


@SQLITE_ONLY
async def test_a_melissas_form_sends_the_catalogues_command_or_says_what_is_wrong(settings):
    async with app_and_client(settings) as (runtime, http):
        await make_user(runtime, ANA)
        await make_user(runtime, BEN)
        await make_controller(runtime, "MEL-1", owner=ANA, type="melissa")
        await make_controller(runtime, "BENS-MEL", owner=BEN, type="melissa")
        token = await log_in(http, ANA)
        page = (await http.get("/app/controllers/MEL-1")).text
        for label in ("Air conditioner", "Mode", "Cool", "Temperature (°C)", "Fan", "High"):
            assert label in page
        path = "/app/controllers/MEL-1/commands"
        setting = {"name": "send_ir_code", "state": "1", "mode": "3", "fan": "2"}
        wrong = await http.post(path, data={**setting, "temp": "42"}, headers=changed_with(token))
        assert wrong.status_code == 400 and "temp: must be 16 to 30" in wrong.text
        sent = await http.post(path, data={**setting, "temp": "22"}, headers=changed_with(token))
        assert sent.status_code == 200 and "queued for the device" in sent.text
        rows = (await http.get(path)).text
        assert "state 1 · mode 3 · temp 22 · fan 2" in text_of(rows) and ">queued<" in rows
        others = await http.post(
            "/app/controllers/BENS-MEL/commands",
            data={**setting, "temp": "22"},
            headers=changed_with(token),
        )
        assert others.status_code == 404


@SQLITE_ONLY
async def test_the_chart_reads_the_apis_summary_over_the_period_asked(settings):
    async with app_and_client(settings) as (runtime, http):
        await make_user(runtime, ANA)
        await make_controller(runtime, "PLUG-1", owner=ANA)
        await make_controller(runtime, "MEL-1", owner=ANA, type="melissa")
        await log_in(http, ANA)
        plug_page = (await http.get("/app/controllers/PLUG-1")).text
        assert "data-chart=" in plug_page and "Energy per day" in plug_page
        assert "Energy per day" not in (await http.get("/app/controllers/MEL-1")).text
        week = await http.get("/app/controllers/PLUG-1/chart?period=week", headers=HTMX)
        assert week.status_code == 200 and "average per hour" in week.text
        assert 'aria-pressed="true">Last week<' in week.text
        odd = await http.get("/app/controllers/PLUG-1/chart?period=year", headers=HTMX)
        assert odd.status_code == 400 and "must be one of hour, day, week, month" in odd.text


@SQLITE_ONLY
async def test_the_controller_pages_readings_are_newest_first_by_arrival(settings):
    """The page lists what the API's history lists: stored by two links in the order
    2, 3, 4, 0, 1 of arrival, the old order by ``id`` showed 1, 0, 4, 3, 2."""
    async with app_and_client(settings) as (runtime, http):
        await make_user(runtime, ANA)
        await make_controller(runtime, SERIAL, owner=ANA)
        await store_out_of_arrival_order(runtime)
        await log_in(http, ANA)
        page = (await http.get(f"/app/controllers/{SERIAL}")).text
        rows = page.split('id="reading-rows"', 1)[1].split("</ol>", 1)[0]
        assert re.findall(r"seq (\d)", text_of(rows)) == ["4", "3", "2", "1", "0"]


def test_the_charts_data_is_each_fields_average_per_bucket():
    buckets = [
        {"start": "2026-11-26 10:00:00", "count": 2, "temp": {"min": 20, "max": 22, "avg": 21}},
        {"start": "2026-11-26 11:00:00", "count": 1, "energy_wh": 3.5, "humidity": {"avg": 40}},
    ]
    since = datetime(2026, 11, 26, 9, 0, 0)
    drawn = chart_series(buckets, since)
    assert drawn["x"] == [1795687200, 1795690800] and drawn["from"] == 1795683600
    assert drawn["series"] == {"humidity": [None, 40.0], "temp": [21.0, None]}
    assert chart_series(buckets, since, only="energy_wh")["series"] == {"energy_wh": [None, 3.5]}


@SQLITE_ONLY
async def test_a_schedule_is_added_paused_and_deleted_with_the_apis_rules(settings):
    async with app_and_client(settings) as (runtime, http):
        await make_user(runtime, ANA)
        await make_controller(runtime, "PLUG-1", owner=ANA)
        await make_controller(runtime, "PLUG-2", owner=ANA)
        token = await log_in(http, ANA)
        page = (await http.get("/app/controllers/PLUG-1")).text
        assert 'value="switch_on_off?state=on"' in page and "Power: Switch off" in page
        path, headers = "/app/controllers/PLUG-1/schedules", changed_with(token)
        form = {
            "day": ["0", "4"],
            "from_time": "07:30",
            "to_time": "08:00",
            "action": "switch_on_off?state=on",
            "end_action": "switch_on_off?state=off",
        }
        wrong = await http.post(path, data={**form, "from_time": "25:00"}, headers=headers)
        assert wrong.status_code == 400 and "from_time" in wrong.text
        added = await http.post(path, data=form, headers=headers)
        assert added.status_code == 200 and "The schedule is added." in added.text
        assert "Mon Fri" in added.text and "07:30\u201308:00" in added.text
        assert "Power state on; then at the end: Power state off" in text_of(added.text)
        schedule_id = re.search(r'data-schedule="(\d+)"', added.text).group(1)
        assert (
            f'id="schedule-{schedule_id}-from" name="from_time" type="time" required value="07:30"'
            in added.text
        )
        assert '<option value="switch_on_off?state=off" selected>' in added.text  # its end
        paused = await http.post(f"{path}/{schedule_id}/active", headers=headers)
        assert ">paused<" in paused.text and ">Resume<" in paused.text
        change = {
            "day": ["1"],
            "from_time": "09:15",
            "to_time": "",
            "action": "switch_on_off?state=off",
            "end_action": "",
        }
        refused = await http.post(
            f"{path}/{schedule_id}", data={**change, "from_time": "9h"}, headers=headers
        )
        assert refused.status_code == 400 and "from_time" in refused.text
        changed = await http.post(f"{path}/{schedule_id}", data=change, headers=headers)
        assert changed.status_code == 200 and "The schedule is changed." in changed.text
        row = changed.text[changed.text.index(f'data-schedule="{schedule_id}"') :]
        cells = text_of(row[: row.index("<details")])  # the row's cells, before its form
        assert ">Tue<" in row and "09:15 (" in row and "Power state off" in cells
        assert "then at the end" not in cells
        assert ">paused<" in row  # a change keeps the state
        elsewhere = await http.post(
            f"/app/controllers/PLUG-2/schedules/{schedule_id}", data=change, headers=headers
        )
        assert elsewhere.status_code == 404
        gone = await http.post(f"{path}/{schedule_id}/delete", headers=headers)
        assert "No schedules yet." in gone.text
        again = await http.post(f"{path}/{schedule_id}/delete", headers=headers)
        assert again.status_code == 404 and f"No schedule {schedule_id}" in again.text


async def test_a_geofence_is_added_paused_and_deleted_with_the_apis_rules(settings):
    async with app_and_client(settings) as (runtime, http):
        await make_user(runtime, ANA)
        await make_controller(runtime, "PLUG-1", owner=ANA)
        await make_controller(runtime, "PLUG-2", owner=ANA)
        token = await log_in(http, ANA)
        path, headers = "/app/controllers/PLUG-1/geofences", changed_with(token)
        form = {
            "latitude": "42.6977",
            "longitude": "23.3219",
            "radius": "200",
            "enter_action": "switch_on_off?state=on",
            "exit_action": "switch_on_off?state=off",
        }
        wrong = await http.post(path, data={**form, "radius": "5"}, headers=headers)
        assert wrong.status_code == 400 and "radius" in wrong.text
        added = await http.post(path, data=form, headers=headers)
        assert added.status_code == 200 and "The geofence is added." in added.text
        assert "42.6977, 23.3219" in added.text and "Power state off" in text_of(added.text)
        geofence_id = re.search(r'data-geofence="(\d+)"', added.text).group(1)
        assert f'data-geofence="{geofence_id}"' in (await http.get(path[: -len("/geofences")])).text
        elsewhere = await http.post(
            f"/app/controllers/PLUG-2/geofences/{geofence_id}/delete", headers=headers
        )
        assert elsewhere.status_code == 404  # not that controller's geofence
        paused = await http.post(f"{path}/{geofence_id}/active", headers=headers)
        assert ">paused<" in paused.text
        radius = re.search(f'id="geofence-{geofence_id}-radius"[^>]*>', paused.text).group(0)
        assert 'value="200"' in radius  # the edit form shows what is stored
        change = {**form, "radius": "350", "enter_action": "switch_on_off?state=off"}
        refused = await http.post(
            f"{path}/{geofence_id}", data={**change, "latitude": "91"}, headers=headers
        )
        assert refused.status_code == 400 and "latitude" in refused.text
        changed = await http.post(f"{path}/{geofence_id}", data=change, headers=headers)
        assert changed.status_code == 200 and "The geofence is changed." in changed.text
        row = changed.text[changed.text.index(f'data-geofence="{geofence_id}"') :]
        assert ">350<" in row and ">paused<" in row
        shown = row[: row.index("<details")]  # the row's cells, before its edit form
        assert text_of(shown).count("Power state off") == 2 and "Power state on" not in shown
        gone = await http.post(f"{path}/{geofence_id}/delete", headers=headers)
        assert "No geofences yet." in gone.text


@SQLITE_ONLY
async def test_a_controllers_page_shows_its_geofences_however_many_the_owner_has_elsewhere(
    settings,
):
    """The page reads the controller's own geofences, not a first page of all the owner's
    (500 on other controllers, written before the per-controller limit, hid a new one)."""
    async with app_and_client(settings) as (runtime, http):
        ana = await make_user(runtime, ANA)
        await make_controller(runtime, "PLUG-1", owner=ANA)
        await make_controller(runtime, "PLUG-2", owner=ANA)
        async with runtime.database.write() as connection:
            other = (await connection.execute(
                select(controllers.c.id).where(controllers.c.serial_number == "PLUG-2")
            )).scalar_one()  # fmt: skip
            fence = {
                "controller_id": other, "user_id": ana, "latitude": 42.0, "longitude": 23.0,
                "radius": 200, "enter_command_name": "switch_on_off",
                "enter_command_fields": '{"state":"on"}', "exit_command_name": "switch_on_off",
                "exit_command_fields": '{"state":"off"}', "created_at": datetime(2026, 11, 1),
                "active": True, "enter_push": False, "exit_push": False,
            }  # fmt: skip
            await connection.execute(insert(geofences), [fence] * 600)
        token = await log_in(http, ANA)
        path, headers = "/app/controllers/PLUG-1/geofences", changed_with(token)
        form = {
            "latitude": "42.6977", "longitude": "23.3219", "radius": "200",
            "enter_action": "switch_on_off?state=on", "exit_action": "switch_on_off?state=off",
        }  # fmt: skip
        added = await http.post(path, data=form, headers=headers)
        assert added.status_code == 200, added.text
        geofence_id = re.search(r'data-geofence="(\d+)"', added.text).group(1)
        page = (await http.get("/app/controllers/PLUG-1")).text
        assert f'data-geofence="{geofence_id}"' in page and "No geofences yet." not in page
