"""`/docs` works with no internet: Swagger UI's assets come from the service itself.

A real `devicecontrol serve`, and the page rendered by a real headless Chromium that can
reach nothing but the loopback: every host name fails to resolve and any other connection
goes to a proxy on a port where nothing listens. The operations show up in the rendered
page only if Swagger UI's script ran, so it came from the service. The page is small: it
loads the OpenAPI document from its URL (`/docs/openapi.json`) instead of carrying it.
"""

from __future__ import annotations

import json
import re
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import httpx
import pytest

from tests.processes import running_server

CHROMIUM = Path("/usr/bin/chromium")
BROWSER_TIMEOUT_S = 90
DOCUMENT_URL = "/docs/openapi.json"
# the page without the document: Swagger UI's set-up and the links to its files
MAX_PAGE_BYTES = 10 * 1024
# any host but the service's fails: no name resolves, and every other connection goes to
# a "proxy" on the discard port, where nothing listens
OFFLINE = [
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
    "--proxy-server=127.0.0.1:9",
    "--proxy-bypass-list=127.0.0.1",
]
# the database plays no part in the docs page
pytestmark = pytest.mark.parametrize("backend", ["sqlite"])


class AssetReferences(HTMLParser):
    """The URLs of the scripts, style sheets and icons a page loads."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        if tag == "script" and attributes.get("src"):
            self.urls.append(attributes["src"])
        elif tag == "link" and attributes.get("href"):
            self.urls.append(attributes["href"])


def asset_references(html: str) -> list[str]:
    parser = AssetReferences()
    parser.feed(html)
    parser.close()
    return parser.urls


def test_the_docs_page_loads_only_assets_the_service_serves_without_a_token(database_url, tmp_path):
    with (
        running_server(database_url, tmp_path) as server,
        httpx.Client(base_url=server.base_url, timeout=10) as http,
    ):
        page = http.get("/docs", headers={"Accept-Encoding": "identity"})
        assert page.status_code == 200, page.text
        assert len(page.content) < MAX_PAGE_BYTES, len(page.content)
        assert f'url: "{DOCUMENT_URL}"' in page.text, page.text
        assert '"openapi"' not in page.text and "/v1/auth/login" not in page.text
        assert http.get(DOCUMENT_URL).json() == http.get("/openapi.json").json()
        urls = asset_references(page.text)
        assert urls, page.text  # the page does load its script and style sheet
        external = [u for u in urls if re.match(r"(?i)([a-z][a-z0-9+.-]*:)?//", u)]
        assert not external, f"the docs page loads assets from elsewhere: {external}"
        for url in urls:
            asset = http.get(url)  # no Authorization header
            assert asset.status_code == 200, url
            assert asset.content, url
        # the assets are no documented operation
        assert not [p for p in http.get("/openapi.json").json()["paths"] if "/docs" in p]


@pytest.mark.skipif(
    not CHROMIUM.exists(), reason=f"{CHROMIUM} is not installed (.ci/run installs it)"
)
def test_the_docs_page_renders_the_operations_in_a_browser_with_no_internet(database_url, tmp_path):
    with running_server(database_url, tmp_path) as server:
        rendered = subprocess.run(
            [
                str(CHROMIUM),
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                f"--user-data-dir={tmp_path / 'chromium'}",
                *OFFLINE,
                "--virtual-time-budget=10000",
                "--dump-dom",
                f"{server.base_url}/docs",
            ],
            capture_output=True,
            text=True,
            timeout=BROWSER_TIMEOUT_S,
            check=False,
            cwd=tmp_path,
        )
    dom = rendered.stdout
    assert rendered.returncode == 0, rendered.stderr
    # Swagger UI drew the operations: only its script, run in the page, writes these
    assert 'class="swagger-ui' in dom, dom[:2000]
    methods = re.findall(r'class="opblock-summary-method"[^>]*>([A-Z]+)<', dom)
    assert "POST" in methods and "GET" in methods, dom[:2000]
    assert 'data-path="/v1/auth/login"' in dom, dom[:2000]
    assert "/v1/controllers" in dom
    # ... from the document it fetched from its URL (the page does not carry it)
    requests = [json.loads(line) for line in server.stderr().splitlines() if line.startswith("{")]
    fetched = [r for r in requests if r.get("event") == "request" and r["route"] == DOCUMENT_URL]
    assert [r["status"] for r in fetched] == [200], requests
