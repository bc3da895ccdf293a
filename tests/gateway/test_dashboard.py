"""The dashboard in headless Chromium (Debian's ``chromium``, driven by Playwright; no
browser download): the topology and live counters appear, and change after events are
published. The test run saves a screenshot (``build/screenshots/dashboard.png``)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import requests

from .servers import NetworkThread

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
SCREENSHOTS = Path(__file__).resolve().parents[2] / "build" / "screenshots"

pytestmark = pytest.mark.skipif(CHROMIUM is None,
                                reason="Debian's chromium is not installed (make test "
                                "installs it: make browser-sysdeps)")


def publish(url: str, n: int) -> None:
    body = "\n".join(json.dumps({"type": "T", "a": i % 8, "b": "HI", "s": "x"})
                     for i in range(n))
    r = requests.post(url + "/api/publish", data=body, timeout=10,
                      headers={"content-type": "application/x-ndjson"})
    assert r.json()["published"] == n


def test_dashboard_shows_the_network_live() -> None:
    from playwright.sync_api import expect, sync_playwright

    with NetworkThread() as gn, sync_playwright() as pw:
        requests.post(gn.url + "/api/subscriptions", json={"profile": "T(a >= 4)"},
                      timeout=10).raise_for_status()
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                     args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.set_default_timeout(15_000)
            page.goto(gn.url + "/")
            expect(page.locator("#status")).to_have_text("live")
            # the topology: three brokers, two edges, B1 marked as the gateway's broker
            expect(page.locator("#topology g.node")).to_have_count(3)
            expect(page.locator("#topology line.edge")).to_have_count(2)
            expect(page.locator('#topology g.gateway[data-broker="B1"]')).to_have_count(1)
            expect(page.locator('#subs tr[data-broker="B2"] td').nth(1)).to_have_text("0 / 1")
            expect(page.locator("#events-total")).to_have_text("0")
            publish(gn.url, 30)
            expect(page.locator("#events-total")).to_have_text("30")
            expect(page.locator("#notified-total")).not_to_have_text("0")
            link = page.locator('[data-link-rate="B1-B2"]')
            expect(link).not_to_have_text("0.0 fr/s · 0 fr")
            # the routing table of B2 and the explain form
            page.select_option("#table-broker", "B2")
            page.click("#table-load")
            expect(page.locator("#roots li")).to_have_count(1)
            expect(page.locator("#roots li")).to_contain_text("T(a > 3)")
            page.fill("#explain-profile", "T(a > 5)")
            page.fill("#explain-event", '{"type": "T", "a": 3, "b": "LO", "s": ""}')
            page.click("#explain-form button")
            expect(page.locator("#explain-result")).to_contain_text("NO MATCH")
            expect(page.locator("#channels")).to_contain_text("no channel")
            publish(gn.url, 20)
            expect(page.locator("#events-total")).to_have_text("50")
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            shot = SCREENSHOTS / "dashboard.png"
            page.screenshot(path=str(shot), full_page=True)
            assert shot.stat().st_size > 10_000
        finally:
            browser.close()
