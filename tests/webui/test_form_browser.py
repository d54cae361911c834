"""The start form and a run from it, in headless Chromium against the simulator (one Locust web UI for all).

The form shows the project's options in groups with plain labels, the SLO preset at "none", the sweep fields
only once a sweep is chosen. A run started from it with an SLO typed in (TTFT p99 at most 5000 ms) draws
the over-time charts within 12 s of its start (default 10 s --attribution-window), and when it is stopped the LLM tab's
stage view shows the SLO verdict, which the log has too. Screenshots: results/webui/start-form.png and
results/webui/llm-tab.png (docs/img/ holds copies a person looked at).
"""

from __future__ import annotations

import re
import time
import urllib.request

import pytest

from tests.support import ROOT
from tests.webui.chromium import (
    form_field,
    open_llm_tab,
    require_chromium,
    start_from_ui,
    type_into,
    wait_for,
    web_ui_on_sim,
)

pytestmark = pytest.mark.slow
SHOTS = ROOT / "results" / "webui"
GROUPS = ["Server", "Workload", "Load shape and run length", "SLOs and live detectors", "Outputs and report"]

IN_FRAME = """
var s = document.getElementById('status');
if (!s) { return null; }
return {charts: Array.from(document.querySelectorAll('figure[data-chart]')).map(function (f) {
          return f.dataset.chart; }),
        status: s.innerText,
        slo: (function () { var c = document.querySelector('[data-key="SLO"]');
                            return c ? c.innerText : null; })()};
"""


def _frame(driver) -> dict | None:
    driver.switch_to.default_content()
    frames = driver.find_elements("css selector", "iframe#llm-cockpit")
    if not frames:
        return None
    driver.switch_to.frame(frames[0])
    try:
        return driver.execute_script(IN_FRAME)
    finally:
        driver.switch_to.default_content()


def test_grouped_form_then_a_run_with_an_slo_shows_charts_early_and_its_verdict(tmp_path):
    require_chromium()
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    env = {"LOCUST_PROMETHEUS_PORT": "0", "LOCUST_INPUT_LEN": "fixed:128", "LOCUST_OUTPUT_LEN": "fixed:32"}
    with web_ui_on_sim(tmp_path, "StreamingChatUser", env) as (driver, web, proc):
        driver.set_window_size(1200, 1000)
        driver.get(web + "/")
        wait_for(lambda: form_field(driver, "inputLen"), 30, "the start form's project options")

        def headings() -> list[str]:  # the section opens with an animation: wait until all show
            return [h.text for h in driver.find_elements(By.CSS_SELECTOR, "h3[data-llm-group]") if h.is_displayed()]

        try:
            wait_for(lambda: headings() == GROUPS, 20, "the form's group headings")
        except AssertionError as e:
            raise AssertionError(f"{e}: {headings()}") from None
        label = driver.execute_script("return document.querySelector('[name=inputLen]')"
                                      ".closest('.MuiFormControl-root').querySelector('label').textContent")
        assert label == "Input length (tokens)", label
        assert Select(driver.find_element(By.CSS_SELECTOR, "select[name=sloPreset]")).first_selected_option.text \
            == "none"
        sweep_users = driver.find_element(By.CSS_SELECTOR, "input[name=sweepUsers]")
        assert not sweep_users.is_displayed()  # no shape chosen: the sweep's fields are out of the way
        shape = Select(driver.find_element(By.CSS_SELECTOR, "select[name=shape]"))
        shape.select_by_value("concurrency-sweep")
        wait_for(sweep_users.is_displayed, 5, "the sweep's fields once a sweep is chosen")
        shape.select_by_value("none")
        wait_for(lambda: not sweep_users.is_displayed(), 5, "the sweep's fields hidden again")
        driver.execute_script("document.querySelector('h3[data-llm-group=slo]').scrollIntoView()")
        SHOTS.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(SHOTS / "start-form.png"))

        type_into(form_field(driver, "sloTtftP99Ms"), "5000")
        start_from_ui(driver, 4, 4)
        started = time.monotonic()
        wait_for(lambda: "RUNNING" in driver.find_element(By.TAG_NAME, "header").text.upper(), 20,
                 "the page to say RUNNING")
        open_llm_tab(driver)
        try:
            first = wait_for(lambda: (d := _frame(driver)) and {"latency", "throughput"} <= set(d["charts"]) and d,
                             30, "the over-time charts in the LLM tab")
        except AssertionError as e:
            driver.save_screenshot(str(SHOTS / "form-run-failed.png"))
            page = driver.execute_script("return [location.href, Array.from(document.scripts).map(s => s.src), "
                                         "document.querySelectorAll('table').length, "
                                         "document.body.innerText.slice(-900)]")
            raise AssertionError(f"{e}\nframe: {_frame(driver)}\npage: {page}\nlog: {proc.output()[-1000:]}") \
                from None
        seen_at = time.monotonic() - started
        elapsed = float(re.search(r"· ([\d.]+) s ·", first["status"]).group(1))  # the run's own clock, as shown
        print(f"over-time charts drawn at {elapsed:.0f} s into the run ({seen_at:.1f} s after START)")
        assert elapsed <= 12, first["status"]
        assert first["slo"] is not None and "so far" in first["slo"], first

        time.sleep(3)
        urllib.request.urlopen(urllib.request.Request(f"{web}/stop", method="POST"), timeout=10).read()
        wait_for(lambda: (d := _frame(driver)) and "stopped" in d["status"], 20, "the run to end")
        done = wait_for(lambda: (d := _frame(driver)) and d["slo"] and "so far" not in d["slo"] and d, 10,
                        "the final SLO verdict")
        assert done["slo"].splitlines()[1] == "passed", done["slo"]
        assert "ttft_p99_ms" in done["slo"] and "<= 5000: ok" in done["slo"], done["slo"]
        driver.set_window_size(1600, 1800)
        time.sleep(2.5)  # one more poll: the frame's height follows its page
        driver.save_screenshot(str(SHOTS / "llm-tab.png"))
        log = wait_for(lambda: "SLO passed: ttft_p99_ms" in proc.output() and proc.output(), 10, "the log line")
        assert "Traceback" not in log, log[-3000:]
