"""The LLM tab in a real Locust web UI, driven by headless Chromium.

1. With a stand-in hub (tests/webui/fake_locustfile.py): the tab appears after a start, shows the hub's
   rows, and its numbers follow the hub between polls.
2. The project's own locustfile.py against the simulator: a run started from the UI's start form fills the tab
   with real figures (requests, TTFT, tokens/s) that change while the test runs. Screenshots land in
   results/webui/ (llm-tab-fake.png, llm-tab-sim.png).
"""

from __future__ import annotations

import re
import urllib.request

import pytest

from tests.support import LOCUST, ROOT, Proc, free_port, wait_http
from tests.webui.chromium import (
    chromium,
    llm_table,
    open_llm_tab,
    require_chromium,
    start_from_ui,
    wait_for,
    web_ui_on_sim,
)

pytestmark = pytest.mark.slow
SHOTS = ROOT / "results" / "webui"


def _stop(web: str) -> None:
    try:
        urllib.request.urlopen(urllib.request.Request(f"{web}/stop", method="POST"), timeout=10).read()
    except OSError:
        pass


def _report_link(driver) -> str:
    """The LLM report link the plugin adds to the "Download Data" tab (an absolute URL)."""
    from selenium.webdriver.common.by import By

    tab = [t for t in driver.find_elements(By.CSS_SELECTOR, "[role=tab]") if t.text.strip().upper() == "DOWNLOAD DATA"]
    assert tab, "no Download Data tab"
    tab[0].click()
    links = wait_for(
        lambda: [a for a in driver.find_elements(By.TAG_NAME, "a") if a.text.strip().startswith("LLM report")],
        10,
        "the LLM report link on the Download Data tab",
    )
    href = links[0].get_attribute("href")
    assert href.endswith("/llm/report"), href
    return href


def _number(text: str) -> float | None:
    text = text.replace(",", "").rstrip("%")
    return float(text) if re.fullmatch(r"-?\d+(\.\d+)?", text) else None


def _row(driver, stage: str) -> dict[str, str] | None:
    rows = [r for r in llm_table(driver) if r.get("Stage") == stage]
    return rows[0] if rows else None


def _web_ui(locustfile: str, host: str, tmp_path, env: dict | None = None) -> tuple[Proc, str]:
    port = free_port()
    argv = [LOCUST, "-f", locustfile, "--web-host", "127.0.0.1", "--web-port", str(port), "--host", host]
    proc = Proc(argv, name="locust-web", env={"PYTHONPATH": str(ROOT), **(env or {})})
    web = f"http://127.0.0.1:{port}"
    wait_http(web + "/", timeout=60, proc=proc)
    return proc, web


def test_llm_tab_shows_and_follows_the_hub(tmp_path):
    require_chromium()
    SHOTS.mkdir(parents=True, exist_ok=True)
    proc, web = _web_ui("tests/webui/fake_locustfile.py", "http://127.0.0.1:9", tmp_path, env={"PYTHONPATH": str(ROOT)})
    with proc, chromium(tmp_path) as driver:
        driver.get(web + "/")
        start_from_ui(driver, 1, 1)
        open_llm_tab(driver)
        first = wait_for(lambda: _row(driver, "main"), 20, "the 'main' row of the LLM table")
        headers = list(first)
        for title in ("Stage", "Users", "Requests", "TTFT p50 (ms)", "TTFT p99 (ms)", "ITL p99 (ms)",
                      "TPOT p99 (ms)", "Output tok/s", "Server KV usage", "Client KV fill"):
            assert title in headers
        n1 = _number(first["Requests"])
        assert n1 is not None and first["TTFT p50 (ms)"] == f"{100.0 + n1:.1f}"
        assert first["ITL p99 (ms)"] == "—"  # the hub has no ITL: shown as missing, not 0
        later = wait_for(
            lambda: (r := _row(driver, "main")) and _number(r["Requests"]) > n1 and r, 20, "the LLM table to update"
        )
        n2 = _number(later["Requests"])
        assert later["TTFT p50 (ms)"] == f"{100.0 + n2:.1f}" and later["Output tok/s"] == f"{10.0 * n2:.1f}"
        wait_for(lambda: _row(driver, "now")["Users"] == "1", 20, "the 'now' row to show Locust's 1 user")
        driver.save_screenshot(str(SHOTS / "llm-tab-fake.png"))
        _stop(web)


def test_llm_tab_with_the_simulator(tmp_path):
    require_chromium()
    SHOTS.mkdir(parents=True, exist_ok=True)
    env = {"LOCUST_PROMETHEUS_PORT": "0", "LOCUST_INPUT_LEN": "fixed:128", "LOCUST_OUTPUT_LEN": "fixed:64"}
    with web_ui_on_sim(tmp_path, None, env) as (driver, web, proc):
        driver.get(web + "/")
        start_from_ui(driver, 4, 4)
        open_llm_tab(driver)

        def has_figures():
            r = _row(driver, "main")
            ok = r and (_number(r["Requests"]) or 0) > 0 and _number(r["TTFT p50 (ms)"]) is not None
            return ok and r

        try:
            first = wait_for(has_figures, 90, "real figures in the LLM tab")
        except AssertionError as e:
            raise AssertionError(f"{e}\n--- locust log ---\n{proc.output()[-3000:]}") from None
        ttft50, ttft99 = _number(first["TTFT p50 (ms)"]), _number(first["TTFT p99 (ms)"])
        itl50, itl99 = _number(first["ITL p50 (ms)"]), _number(first["ITL p99 (ms)"])
        assert 0 < ttft50 <= ttft99 and 0 < itl50 <= itl99, first
        assert (_number(first["Output tok/s"]) or 0) > 0, first
        later = wait_for(
            lambda: (r := has_figures()) and _number(r["Requests"]) > _number(first["Requests"]) and r,
            60,
            "the request count in the LLM tab to grow",
        )
        assert later["Output tok/s"] != first["Output tok/s"] or later["TTFT p99 (ms)"] != first["TTFT p99 (ms)"]
        now = wait_for(lambda: (r := _row(driver, "now")) and r["Server KV usage"].endswith("%") and r, 30,
                       "the server KV usage (scraped from the simulator's /metrics)")
        assert now["Users"] == "4" and 0 <= _number(now["Server KV usage"]) <= 100, now
        assert 0 <= _number(now["Client KV fill"]) <= 100, now
        driver.save_screenshot(str(SHOTS / "llm-tab-sim.png"))
        href = _report_link(driver)
        with urllib.request.urlopen(href, timeout=30) as r:
            assert r.status == 200 and "<html" in r.read(4096).decode(errors="replace").lower()
        _stop(web)
        assert "Traceback" not in proc.output(), proc.output()[-3000:]
