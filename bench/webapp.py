"""python -m bench.webapp: the web app in a real browser (Debian's Chromium via Playwright).

A throw-away database with one user owning CONTROLLERS smart plugs (device secrets set), a
real ``devicecontrol serve`` with its embedded broker, and one headless Chromium:

- the controller list, navigated to ROUNDS times after logging in: the browser's own
  navigation timing (``domInteractive``, ``loadEventEnd``: every script and style ran) and
  the time until the list's live stream is open;
- readings published by a plug over MQTT while the list is open, one every 100 ms: from
  the publish (this process's clock) to the moment the page's cell shows the value (the
  browser's clock, the same machine's, noted by a MutationObserver);
- the bytes of the app's own JavaScript and CSS, vendored libraries included.

The live path's floor is bench.events' (publish to event on a plain stream reader).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import aiomqtt
from playwright.async_api import async_playwright

from bench.databases import DEFAULT_POSTGRESQL_URL, throwaway_database
from bench.devices import print_result, quantile, serving
from bench.servers import free_port
from devicecontrol.config import Settings
from devicecontrol.controllers.provisioning import add_controller
from devicecontrol.controllers.spec import ControllerSpec
from devicecontrol.database.migrate import upgrade_database
from devicecontrol.runtime import Runtime
from devicecontrol.users.service import create_user

CONTROLLERS = 50
USER, PASSWORD = "bench@example.com", "bench-password-1"
SECRET = "bench-device-secret-0001"  # noqa: S105 (benchmark data only)
STATIC = Path(__file__).resolve().parents[1] / "src" / "devicecontrol" / "webapp" / "static"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-dev-shm-usage",
]  # fmt: skip
WATCH = """serial => {
  window.__seen = [];
  const cell = document.querySelector(`[data-serial="${serial}"] [data-field="reading"]`);
  new MutationObserver(() => window.__seen.push([Date.now(), cell.textContent]))
    .observe(cell, {childList: true, characterData: true, subtree: true});
}"""


def serial(index: int) -> str:
    return f"BENCH-PLUG-{index:02d}"


async def fill(database_url: str) -> None:
    runtime = Runtime.from_settings(Settings(database_url=database_url))
    try:
        await upgrade_database(runtime.database)
        await create_user(runtime, USER, password=PASSWORD, firstname="Bench", lastname="User")
        for index in range(CONTROLLERS):
            spec = ControllerSpec(
                serial(index), f"{index:012X}", "smart_plug", name=f"Plug {index}",
                owner=USER, device_secret=SECRET,
            )  # fmt: skip
            await add_controller(runtime, spec)
    finally:
        await runtime.database.dispose()


def app_bytes() -> int:
    return sum(path.stat().st_size for path in STATIC.rglob("*") if path.suffix in (".js", ".css"))


async def measure(base_url: str, mqtt_port: int, rounds: int, readings: int) -> dict[str, Any]:
    result: dict[str, Any] = {"app's JS and CSS, KB": app_bytes() / 1000}
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS
        )
        page = await (await browser.new_context()).new_page()
        await page.goto(f"{base_url}/app/")
        await page.get_by_label("E-mail address").fill(USER)
        await page.get_by_label("Password").fill(PASSWORD)
        await page.get_by_role("button", name="Log in").click()
        await page.wait_for_selector(f'[data-serial="{serial(CONTROLLERS - 1)}"]')
        interactive, loaded = [], []
        for _ in range(rounds):
            await page.goto(f"{base_url}/app/", wait_until="load")
            timing = await page.evaluate(
                "() => { const n = performance.getEntriesByType('navigation')[0];"
                " return [n.domInteractive, n.loadEventEnd]; }"
            )
            interactive.append(timing[0])
            loaded.append(timing[1])
        rows = await page.locator("[data-serial]").count()
        result["list rows"] = rows
        result["list domInteractive p50 / p99 ms"] = (
            f"{quantile(interactive, 0.5):.0f} / {quantile(interactive, 0.99):.0f}"
        )
        result["list loaded (scripts run) p50 / p99 ms"] = (
            f"{quantile(loaded, 0.5):.0f} / {quantile(loaded, 0.99):.0f}"
        )
        result.update(await live_readings(page, mqtt_port, readings))
        await browser.close()
    return result


async def live_readings(page: Any, mqtt_port: int, count: int) -> dict[str, Any]:
    """Publish ``count`` readings of the first plug, one every 100 ms; when each showed."""
    watched = serial(0)
    await page.evaluate(WATCH, watched)
    published: dict[int, float] = {}
    identity = {"identifier": watched, "username": watched, "password": SECRET}
    async with aiomqtt.Client("127.0.0.1", mqtt_port, **identity) as device:
        await asyncio.sleep(1.0)  # its online reaches the page first
        for number in range(count):
            value = 100_000 + number
            published[value] = time.time() * 1000
            payload = f'{{"relay_state": "on", "power": [{value}]}}'
            await device.publish(f"devices/{watched}/state", payload, qos=1)
            await asyncio.sleep(0.1)
        await asyncio.sleep(2.0)
    seen: list[tuple[float, str]] = await page.evaluate("() => window.__seen")
    shown: dict[int, float] = {}
    for at, text in seen:
        for value in published:
            if value not in shown and str(value) in text:
                shown[value] = at
    latencies = [shown[value] - published[value] for value in published if value in shown]
    return {
        "readings published / shown": f"{len(published)} / {len(shown)}",
        "reading publish → shown p50 ms": quantile(latencies, 0.5),
        "reading publish → shown p99 ms": quantile(latencies, 0.99),
        "reading publish → shown max ms": max(latencies) if latencies else float("nan"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.webapp", description=__doc__)
    parser.add_argument("--backend", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--postgresql-url", default=DEFAULT_POSTGRESQL_URL)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--readings", type=int, default=100)
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory(prefix="devicecontrol-bench-webapp-"),
        throwaway_database(args.backend, CONTROLLERS, args.postgresql_url) as database_url,
    ):
        asyncio.run(fill(database_url))
        port, mqtt_port = free_port(), free_port()
        env = {**os.environ, "DEVICECONTROL_LOG_LEVEL": "warning"}
        env["DEVICECONTROL_MQTT_LISTEN"] = f"127.0.0.1:{mqtt_port}"
        with serving(database_url, port, env) as (base_url, _):
            result = asyncio.run(measure(base_url, mqtt_port, args.rounds, args.readings))
    print_result(result, width=40)


if __name__ == "__main__":
    main()
