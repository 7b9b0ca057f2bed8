"""The web app in a real browser (Debian's Chromium, headless) against a real ``serve``
with its device link, a plug played over MQTT: log-in, the list changing live, what an
attacker would try, and axe-core's rules at 360 px and at desktop width.

One server for the module, on SQLite (the rules that touch the database run on both
backends in-process, test_sessions.py); each test has users of its own.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import re
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import aiomqtt
import httpx
import msgspec
import pytest
import pytest_asyncio
from playwright.async_api import Browser, BrowserContext, Locator, Page, expect

from devicecontrol.auth.sessions import COOKIE_NAME
from devicecontrol.automations.geofences import service as geofences
from devicecontrol.automations.schedules import service as schedules
from devicecontrol.clock import utcnow
from devicecontrol.config import Settings
from devicecontrol.devices import identity, repository
from devicecontrol.events import slots
from devicecontrol.events.slots import STREAMS_PER_USER
from devicecontrol.runtime import Runtime
from devicecontrol.users.identity import username_key
from devicecontrol.users.repository import find_active_user_id
from tests.devices.link.support import SECRET, next_command
from tests.factories import PASSWORD, make_controller, make_user
from tests.processes import Server, run_cli, running_server
from tests.tcp_proxy import TcpProxy, tcp_proxy
from tests.webapp.browser import DESKTOP, PHONE, WAIT_MS, browser, serious_violations

__all__ = ["browser"]  # the module's browser, as a fixture of this module
pytestmark = pytest.mark.asyncio(loop_scope="module")
_numbers = itertools.count(1)
FOREIGN_ORIGIN = "http://foreign.example"
LOGIN_PAGE = re.compile(r"/app/login$")
RECONNECT_MS = 10_000  # the browser's own retry delay (3 s in Chromium) and the resume
# scripts/refresh-webapp-screenshot sets it: where the controller page's picture goes
SCREENSHOT = os.environ.get("DEVICECONTROL_WEBAPP_SCREENSHOT")


@dataclass
class Served:
    server: Server
    database_url: str

    def url(self, path: str) -> str:
        return self.server.base_url + path

    @property
    def port(self) -> int:
        return int(self.server.base_url.rpartition(":")[2])


@pytest.fixture(scope="module")
def served(database_factories, tmp_path_factory) -> Iterator[Served]:
    factory = database_factories["sqlite"]
    url = factory.new_url(tmp_path_factory.mktemp("webapp-db"))
    workdir = tmp_path_factory.mktemp("webapp-serve")
    with running_server(url, workdir, device_link=True) as server:
        yield Served(server, url)
    factory.drop(url)


@pytest_asyncio.fixture(loop_scope="module")
async def context(browser: Browser) -> AsyncIterator[BrowserContext]:
    opened = await browser.new_context(viewport=DESKTOP)
    try:
        yield opened
    finally:
        await opened.close()


@pytest_asyncio.fixture(loop_scope="module")
async def proxy(served: Served) -> AsyncIterator[TcpProxy]:
    """A TCP proxy before the module's server, to cut the browser's connections."""
    async with tcp_proxy(served.port) as started:
        yield started


async def owner_with_plug(served: Served, *, automated: bool = False) -> tuple[str, str]:
    """A new user and a smart plug of theirs, whose device secret is SECRET; ``automated``:
    with a weekly schedule and a geofence too."""
    number = next(_numbers)
    user, serial = f"owner{number}@example.com", f"WEB-PLUG-{number}"
    runtime = Runtime.from_settings(Settings(database_url=served.database_url))
    try:
        user_id = await make_user(runtime, user)
        await make_controller(runtime, serial, owner=user, name="Living-room plug")
        if automated:
            on, off = {"state": "on"}, {"state": "off"}
            await schedules.create_schedule(
                runtime,
                user_id,
                {"controller_id": serial, "days": "1111100", "from_time": "07:30",
                 "command_name": "switch_on_off", "command_fields": on},
            )  # fmt: skip
            await geofences.create_geofence(
                runtime,
                user_id,
                {"controller_id": serial, "latitude": 42.7, "longitude": 23.3, "radius": 200,
                 "enter_command_name": "switch_on_off", "enter_command_fields": on,
                 "exit_command_name": "switch_on_off", "exit_command_fields": off},
            )  # fmt: skip
        async with runtime.database.write() as connection:
            await repository.set_device_secret(
                connection, serial, identity.device_secret_digest(SECRET), utcnow()
            )
    finally:
        await runtime.close()
    return user, serial


async def log_in(context: BrowserContext, served: Served, user: str) -> Page:
    page = await context.new_page()
    await page.goto(served.url("/app/"))
    await expect(page).to_have_url(LOGIN_PAGE)
    await page.get_by_label("E-mail address").fill(user)
    await page.get_by_label("Password").fill(PASSWORD)
    await page.get_by_role("button", name="Log in").click()
    await expect(page.get_by_role("heading", name="Your controllers")).to_be_visible()
    return page


def csp_reports(page: Page) -> list[str]:
    """Messages of anything the page's Content-Security-Policy blocked, and of any error
    its scripts threw, as they come."""
    blocked: list[str] = []

    def note(message: object) -> None:
        text = getattr(message, "text", "")
        if "Content Security Policy" in text:
            blocked.append(text)

    page.on("console", note)
    page.on("pageerror", lambda error: blocked.append(f"script error: {error}"))
    return blocked


def plug(served: Served, serial: str) -> aiomqtt.Client:
    return aiomqtt.Client(
        "127.0.0.1",
        served.server.mqtt_port,
        identifier=serial,
        username=serial,
        password=SECRET,
    )


async def test_a_plug_coming_online_and_its_reading_show_live_until_tokens_revoke(
    served, context, proxy
):
    user, serial = await owner_with_plug(served)
    page = await log_in(context, served, user)
    blocked = csp_reports(page)
    # the page again through a proxy that can cut its connections (a cookie knows no port)
    await page.goto(f"http://127.0.0.1:{proxy.port}/app/")
    row = page.locator(f'tr[data-serial="{serial}"]')
    await expect(row.locator('[data-field="online"]')).to_have_text("offline")
    await expect(page.locator("#live-status")).to_have_text(re.compile("^Live"), timeout=WAIT_MS)
    async with plug(served, serial) as device:
        await expect(row.locator('[data-field="online"]')).to_have_text("online", timeout=WAIT_MS)
        await device.publish(
            f"devices/{serial}/state", b'{"relay_state": "on", "power": 3.5}', qos=1
        )
        await expect(row.locator('[data-field="reading"]')).to_contain_text(
            "power 3.5", timeout=WAIT_MS
        )
        # the connection drops: what happens meanwhile arrives once the browser has
        # reconnected by itself, resuming after the last event it saw (Last-Event-ID; a
        # stream opened afresh would not send this reading again)
        await expect(page.locator("#live-status")).to_have_text(re.compile("^Live"))
        opened = proxy.accepted
        proxy.cut()
        await device.publish(
            f"devices/{serial}/state", b'{"relay_state": "on", "power": 7.25}', qos=1
        )
        await expect(page.locator("#live-status")).to_have_text(
            "Connection lost; reconnecting…", timeout=WAIT_MS
        )
        await expect(row.locator('[data-field="reading"]')).to_contain_text(
            "power 7.25", timeout=RECONNECT_MS
        )
        assert proxy.accepted > opened
    await expect(row.locator('[data-field="online"]')).to_have_text("offline", timeout=WAIT_MS)
    # nothing of the session is within a script's reach, nor in the page's address
    assert await page.evaluate("document.cookie") == ""
    [cookie] = [c for c in await context.cookies() if c["name"] == COOKIE_NAME]
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    # web storage holds no secret (htmx keeps the page's path there, and nothing else)
    stored = await page.evaluate(
        "JSON.stringify([localStorage, sessionStorage].map(s => Object.entries(s)))"
    )
    assert cookie["value"] not in stored and "token" not in stored.lower(), stored
    assert await page.evaluate("localStorage.length") == 0
    assert cookie["value"] not in page.url and "token" not in page.url
    assert blocked == []  # htmx and the page's script ran under the strict policy
    # an operator's `tokens revoke` ends the session at once
    revoked = await asyncio.to_thread(
        run_cli, "tokens", "revoke", user, database_url=served.database_url
    )
    assert revoked.returncode == 0, revoked.stderr
    await page.reload()
    await expect(page).to_have_url(LOGIN_PAGE)


async def test_a_tab_past_the_accounts_stream_limit_waits_and_says_so_instead_of_reloading(
    served, context
):
    """The eleventh tab: the stream is refused 429; the page says why and when it will try
    again, and stays (a 401 used to send it through the log-in every 3 s)."""
    user, _ = await owner_with_plug(served)
    runtime = Runtime.from_settings(Settings(database_url=served.database_url))
    try:
        user_id = await make_user_id(runtime, user)
        taken = [await slots.take(runtime, user_id) for _ in range(STREAMS_PER_USER)]
        page = await log_in(context, served, user)
        await expect(page.locator("#live-status")).to_have_text(
            f"Too many live pages are open for your account; trying again in "
            f"{slots.RETRY_AFTER_S} seconds.",
            timeout=WAIT_MS,
        )
        await page.wait_for_timeout(4000)  # past the 3 s after which a refusal reloads
        await expect(page.locator("#live-status")).to_contain_text("Too many live pages")
        assert page.url.endswith("/app/")
        await slots.give_back(runtime, taken)
    finally:
        await runtime.close()


RLO = "\u202e"  # RIGHT-TO-LEFT OVERRIDE: turns around what follows it, unless isolated
HOSTILE_READING = {"note": RLO + "gnp.exe", "blob": "x" * 3000, "power": 2.5}


async def test_device_text_turns_only_its_own_value_and_never_widens_the_page(served, context):
    """A value with U+202E stays in a <bdi> of its own (the fields after it read as sent),
    and a 3,000-character unbroken value wraps: the list and the controller page stay as
    wide as the window, drawn by the server and live, at both widths."""
    user, serial = await owner_with_plug(served)
    page = await log_in(context, served, user)
    row = page.locator(f'tr[data-serial="{serial}"]')
    async with plug(served, serial) as device:
        await expect(page.locator("#live-status")).to_have_text(
            re.compile("^Live"), timeout=WAIT_MS
        )
        payload = json.dumps(HOSTILE_READING).encode()
        await device.publish(f"devices/{serial}/state", payload, qos=1)
        live = row.locator('[data-field="reading"]')
        await expect(live).to_contain_text("power 2.5", timeout=WAIT_MS)

    async def isolated_and_narrow(cell: Locator) -> None:
        values = await cell.locator(".field").evaluate_all(
            "fields => fields.map(f => [...f.querySelectorAll('bdi')].map(b => b.textContent))"
        )
        assert values == [["note", RLO + "gnp.exe"], ["blob", "x" * 3000], ["power", "2.5"]]
        for size in (DESKTOP, PHONE):
            await page.set_viewport_size(size)
            # the chart follows a resize on the next frame: the page is as wide as the window
            # once it has (device text never makes it wider)
            await as_wide_as_the_window(page, size["width"])
        await page.set_viewport_size(DESKTOP)

    await isolated_and_narrow(row.locator('[data-field="reading"]'))  # drawn live
    await page.reload()
    await isolated_and_narrow(row.locator('[data-field="reading"]'))  # drawn by the server
    await page.goto(served.url(f"/app/controllers/{serial}"))
    await isolated_and_narrow(page.locator('dd[data-field="reading"]'))


async def as_wide_as_the_window(page: Page, width: int) -> None:
    """Wait (up to WAIT_MS) until the page is no wider than ``width``; fail with its width.
    Polled from here: the page's policy lets no string of script be evaluated in it."""
    wide = 0
    for _ in range(WAIT_MS // 100):
        wide = await page.evaluate("document.documentElement.scrollWidth")
        if wide <= width:
            return
        await page.wait_for_timeout(100)
    raise AssertionError(f"the page is {wide} px wide in a window of {width}")


async def make_user_id(runtime: Runtime, username: str) -> int:
    async with runtime.database.read() as connection:
        user_id = await find_active_user_id(connection, username_key(username))
    assert user_id is not None
    return user_id


async def test_pages_pass_axe_at_both_widths_hide_anothers_controller_and_log_out_for_good(
    served, browser, context
):
    user, serial = await owner_with_plug(served, automated=True)
    _, others = await owner_with_plug(served)
    page = await log_in(context, served, user)
    answer = await page.goto(served.url(f"/app/controllers/{others}"))
    assert answer is not None and answer.status == 404  # typed into the address
    await expect(page.get_by_role("alert")).to_have_text(
        f"No controller with serial number {others} is assigned to you."
    )
    pages = ["/app/", f"/app/controllers/{serial}", "/app/profile", f"/app/controllers/{others}"]
    for path in pages:  # each page loaded once, checked at both widths (axe injected once)
        await page.goto(served.url(path))
        # the rows' Edit forms open, so that axe checks them too
        opened = await page.locator("details.change").evaluate_all(
            "all => all.map(details => { details.open = true; return 1; }).length"
        )
        assert opened == (2 if path.endswith(serial) else 0), (path, opened)
        for size in (PHONE, DESKTOP):
            await page.set_viewport_size(size)
            assert await serious_violations(page) == [], (size, path)
    [cookie] = [c for c in await context.cookies() if c["name"] == COOKIE_NAME]
    await page.goto(served.url("/app/"))
    await page.get_by_role("button", name="Log out").click()
    await expect(page).to_have_url(LOGIN_PAGE)
    for size in (PHONE, DESKTOP):
        await page.set_viewport_size(size)
        assert await serious_violations(page) == [], (size, "/app/login")
    # the cookie, replayed after log-out, opens neither a page nor a stream
    replay = await browser.new_context(viewport=DESKTOP)
    try:
        await replay.add_cookies([cookie])
        replayed = await replay.new_page()
        await replayed.goto(served.url("/app/"))
        await expect(replayed).to_have_url(LOGIN_PAGE)
    finally:
        await replay.close()
    async with httpx.AsyncClient(timeout=10) as http:
        stream = await http.get(
            served.url("/v1/controllers/events"),
            headers={"Cookie": f"{COOKIE_NAME}={cookie['value']}"},
        )
    assert stream.status_code == 401


async def test_a_form_from_another_origin_changes_nothing_and_the_apps_own_claims(served, context):
    user, _ = await owner_with_plug(served)
    unowned = f"WEB-FREE-{next(_numbers)}"
    runtime = Runtime.from_settings(Settings(database_url=served.database_url))
    try:
        await make_controller(runtime, unowned)
    finally:
        await runtime.close()
    page = await log_in(context, served, user)
    form = (
        f'<form method="post" action="{served.url("/app/claim")}">'
        f'<input name="serial_number" value="{unowned}"><button>go</button></form>'
    )
    await context.route(
        f"{FOREIGN_ORIGIN}/**",
        lambda route: route.fulfill(status=200, content_type="text/html", body=form),
    )
    await page.goto(f"{FOREIGN_ORIGIN}/attack")
    async with page.expect_navigation() as navigation:
        await page.get_by_role("button", name="go").click()
    refused = await navigation.value
    assert refused is not None and refused.status == 403
    await expect(page.get_by_role("alert")).to_contain_text("refused")
    await page.goto(served.url("/app/"))
    await expect(page.locator(f'tr[data-serial="{unowned}"]')).to_have_count(0)
    # the app's own form, with the network down: said in words, not a silent page
    await context.set_offline(True)
    try:
        await page.get_by_label("Serial number").fill(unowned)
        await page.get_by_role("button", name="Claim").click()
        await expect(page.locator("#claim-message")).to_have_text(
            "The service cannot be reached; check the connection and try again."
        )
    finally:
        await context.set_offline(False)
    # and with it back, the claim is made, its row added to the list
    await page.get_by_role("button", name="Claim").click()
    await expect(page.locator("#claim-message")).to_have_text(f"Controller {unowned} is yours now.")
    await expect(page.locator(f'tr[data-serial="{unowned}"]')).to_have_count(1)


async def test_a_command_sent_with_a_click_ends_succeeded_and_a_schedule_is_added_and_changed(
    served, context
):
    user, serial = await owner_with_plug(served)
    page = await log_in(context, served, user)
    blocked = csp_reports(page)
    await page.get_by_role("link", name="Living-room plug").click()
    await expect(page.get_by_role("heading", level=1)).to_contain_text(serial)
    await expect(page.locator("#chart canvas")).not_to_have_count(0)  # uPlot drew it
    online = page.locator('dd[data-field="online"]')
    async with plug(served, serial) as device:
        await device.subscribe(f"devices/{serial}/commands", qos=1)
        await expect(online).to_have_text("online", timeout=WAIT_MS)
        await device.publish(
            f"devices/{serial}/state", b'{"relay_state": "off", "power": 0.4}', qos=1
        )
        await expect(page.locator("#reading-rows li").first).to_contain_text(
            "power 0.4", timeout=WAIT_MS
        )
        await page.get_by_role("button", name="Switch on").click()
        await expect(page.locator("#command-message")).to_have_text(
            "Power: queued for the device; its status follows below."
        )
        delivered = await next_command(device)
        assert delivered["name"] == "switch_on_off" and delivered["params"] == {"state": "on"}
        status = page.locator(f'tr[data-command="{delivered["id"]}"] [data-field="status"]')
        await expect(status).to_have_text("sent", timeout=WAIT_MS)
        await device.publish(
            f"devices/{serial}/commands/result",
            msgspec.json.encode({"id": delivered["id"], "status": "succeeded"}),
            qos=1,
        )
        await expect(status).to_have_text("succeeded", timeout=WAIT_MS)
        await device.publish(
            f"devices/{serial}/state", b'{"relay_state": "on", "power": 41.5}', qos=1
        )
        await expect(page.locator("#reading-rows li").first).to_contain_text("power 41.5")
        # a weekly schedule, added through the page's form
        await page.get_by_label("At (local time)").fill("07:30")
        await page.get_by_label("Do", exact=True).select_option(label="Power: Switch on")
        await page.get_by_role("button", name="Add the schedule").click()
        await expect(page.locator("#schedule-message")).to_have_text("The schedule is added.")
        schedule = page.locator("tr[data-schedule]")
        await expect(schedule).to_contain_text("07:30")
        # and changed through its row's own form
        await schedule.get_by_text("Edit").click()
        await schedule.get_by_label("At (local time)").fill("08:45")
        await schedule.get_by_role("button", name="Save the schedule").click()
        await expect(page.locator("#schedule-message")).to_have_text("The schedule is changed.")
        await expect(schedule).to_contain_text("08:45")
        if SCREENSHOT:
            await page.set_viewport_size({"width": 1100, "height": 900})
            await page.screenshot(path=SCREENSHOT, full_page=True)
        week = page.get_by_role("button", name="Last week")
        await week.click()
        await expect(week).to_have_attribute("aria-pressed", "true")
        await expect(page.locator("#chart canvas")).not_to_have_count(0)  # drawn again
        assert blocked == []  # the chart, too, runs under the strict policy
