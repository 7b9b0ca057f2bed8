"""One headless Chromium for the browser tests' module (on each pytest-xdist worker that
runs them), Debian's own: never a browser downloaded by Playwright. Playwright's async API
on the module's event loop: its sync API would hold a running loop in the worker's thread,
which every other test's ``asyncio.run`` then trips on. Each test opens contexts of its
own (own cookies)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from playwright.async_api import Browser, Page, async_playwright

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]
AXE_SOURCE = (Path(__file__).parent / "vendor" / "axe.min.js").read_text(encoding="utf-8")
CHROMIUM_INSTALLED = CHROMIUM.exists()
PHONE = {"width": 360, "height": 740}
DESKTOP = {"width": 1280, "height": 800}
WAIT_MS = 5000  # what a live change promised within 1 s gets in a loaded test run


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def browser() -> AsyncIterator[Browser]:
    if not CHROMIUM_INSTALLED:
        pytest.fail(f"{CHROMIUM} is not installed (.ci/run installs Debian's chromium)")
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS
        )
        try:
            yield launched
        finally:
            await launched.close()


async def serious_violations(page: Page) -> list[dict[str, Any]]:
    """axe-core's serious and critical violations of the page as it is now."""
    if not await page.evaluate("typeof window.axe !== 'undefined'"):
        await page.evaluate(AXE_SOURCE)
    found: list[dict[str, Any]] = await page.evaluate(
        "async () => (await axe.run(document)).violations"
        ".filter(v => v.impact === 'serious' || v.impact === 'critical')"
        ".map(v => ({id: v.id, impact: v.impact, nodes: v.nodes.map(n => n.target)}))"
    )
    return found
