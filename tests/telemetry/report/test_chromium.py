"""The report in headless Chromium, offline from a file:// URL: plots render, nothing is fetched.

The screenshot lands in the test's tmp dir (``report.png``); its path is printed (``pytest -s``).
"""

from __future__ import annotations

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service

from telemetry.outputs.report import render
from tests.requires import require_tool
from tests.telemetry.report.synthetic import single_stage_no_server, sweep_summary

pytestmark = pytest.mark.slow  # every test here starts a real process

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", "--no-first-run", "--window-size=1400,1000")

PLOT_BOXES = """
return Array.from(document.querySelectorAll('svg.chart')).map(function (s) {
  var r = s.getBoundingClientRect(), marks = s.querySelectorAll('path.line, rect.bar, circle');
  var drawn = Array.from(marks).filter(function (m) { var b = m.getBBox(); return b.width > 0 || b.height > 0; });
  return {title: s.querySelector('title').textContent, w: r.width, h: r.height, marks: drawn.length};
});
"""


@pytest.fixture
def browser(tmp_path):
    chromedriver = require_tool("chromedriver", "chromium-driver")
    opts = webdriver.ChromeOptions()
    for flag in (*FLAGS, f"--user-data-dir={tmp_path / 'profile'}"):
        opts.add_argument(flag)
    drv = webdriver.Chrome(options=opts, service=Service(chromedriver))
    drv.set_page_load_timeout(30)
    yield drv
    drv.quit()


def _open(browser, tmp_path, summary: dict, name: str):
    page = tmp_path / f"{name}.html"
    page.write_text(render(summary), encoding="utf-8")
    browser.get(page.as_uri())
    return browser.execute_script(PLOT_BOXES)


def test_report_renders_offline_with_plots(browser, tmp_path):
    plots = _open(browser, tmp_path, sweep_summary(), "report")
    drawn = [p for p in plots if p["w"] > 100 and p["h"] > 40 and p["marks"] > 0]
    assert len(drawn) >= 3, plots
    assert {"Throughput against load", "TTFT distribution", "Server KV-cache usage and queue"} <= {
        p["title"] for p in drawn}
    # nothing but the page itself was loaded: no scripts, styles, fonts or images from anywhere
    assert browser.execute_script("return performance.getEntriesByType('resource').length") == 0
    for width in (1000, 600):  # the wide stage table scrolls inside its card; the page never scrolls sideways
        browser.set_window_size(width, 1000)
        page_w, view_w = browser.execute_script("return [document.documentElement.scrollWidth, "
                                                "document.documentElement.clientWidth]")
        assert page_w <= view_w, (width, page_w, view_w)
    total_h = browser.execute_script("return document.body.scrollHeight")
    browser.set_window_size(1400, min(total_h + 40, 9000))
    shot = tmp_path / "report.png"
    assert browser.save_screenshot(str(shot))
    assert shot.stat().st_size > 20_000
    print(f"report screenshot: {shot}")


def test_degraded_report_still_shows_plots(browser, tmp_path):
    plots = _open(browser, tmp_path, single_stage_no_server(), "single")
    assert len([p for p in plots if p["w"] > 100 and p["h"] > 40 and p["marks"] > 0]) >= 3, plots
