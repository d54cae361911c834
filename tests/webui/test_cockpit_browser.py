"""The cockpit in a real Locust web UI, driven by headless Chromium against the simulator (issue #19's "must show").

A concurrency sweep (1, 2, 4 users; 8 s stages) is started from the web form — the sweep fields prefilled from
LOCUST_* variables, as a person would type them. The LLM tab then shows the live charts (an iframe of /llm/charts
under the tab's table) and the stage view; between two polls the charts' lines gain data points, and the chart
against load appears once two stages are measured. Every entry of the Download Data tab answers 200 with its
content type during the run and after it. Screenshot: results/webui/llm-cockpit.png (docs/img/ holds one).
"""

from __future__ import annotations

import json
import re
import time
import urllib.request

import pytest

from tests.support import ROOT
from tests.webui.chromium import open_llm_tab, require_chromium, start_from_ui, wait_for, web_ui_on_sim

pytestmark = pytest.mark.slow
SHOT = ROOT / "results" / "webui" / "llm-cockpit.png"
"""docs/img/llm-cockpit.png is a copy of one (a test run does not rewrite a tracked file)."""

POINTS = """
var out = {};
document.querySelectorAll('figure[data-chart]').forEach(function (f) {
  var n = 0;
  f.querySelectorAll('path.line').forEach(function (p) { n += (p.getAttribute('d').match(/[ML]/g) || []).length; });
  out[f.dataset.chart] = n;
});
return {points: out, polls: Number(document.body.dataset.polls), status: document.getElementById('status').innerText};
"""

TYPES = {"summary.json": "application/json", "stats.csv": "text/csv", "stages.csv": "text/csv",
         "report": "text/html", "charts": "text/html", "live.csv": "text/csv", "live": "application/json"}


def _downloads(driver) -> dict[str, str]:
    """The LLM entries of the Download Data tab: route tail -> absolute URL."""
    from selenium.webdriver.common.by import By

    tab = [t for t in driver.find_elements(By.CSS_SELECTOR, "[role=tab]") if t.text.strip().upper() == "DOWNLOAD DATA"]
    tab[0].click()
    links = wait_for(lambda: [a for a in driver.find_elements(By.TAG_NAME, "a") if "/llm/" in (a.get_attribute("href")
                                                                                              or "")], 10, "LLM links")
    return {a.get_attribute("href").rsplit("/llm/", 1)[1]: a.get_attribute("href") for a in links}


def _in_cockpit(driver) -> dict | None:
    """POINTS read inside the LLM tab's live charts frame (found afresh: React may re-mount the tab's content, and
    the tab script then puts a new frame in); None while the frame or its first answer is not there."""
    driver.switch_to.default_content()
    frames = driver.find_elements("css selector", "iframe#llm-cockpit")
    if not frames:
        return None
    driver.switch_to.frame(frames[0])
    try:
        return driver.execute_script("return document.getElementById('status') ? (function () {" + POINTS + "})() "
                                     ": null;")
    finally:
        driver.switch_to.default_content()


def _frames(driver) -> list[str]:
    """What the tab holds, for a failure message: each frame's src and the start of its text."""
    driver.switch_to.default_content()
    out = [f"{driver.current_url} tables={len(driver.find_elements('css selector', 'table'))} "
           f"page={driver.execute_script('return document.body.innerText')!r:.300}"]
    for f in driver.find_elements("css selector", "iframe"):
        src = f.get_attribute("src")
        driver.switch_to.frame(f)
        out.append(f"{src}: {driver.execute_script('return document.body ? document.body.innerText : null')!r:.400}")
        driver.switch_to.default_content()
    return out


def _fetch_all(urls: dict[str, str]) -> dict[str, tuple[int, str, bytes]]:
    out = {}
    for name, url in urls.items():
        with urllib.request.urlopen(url, timeout=30) as r:
            out[name] = (r.status, r.headers.get_content_type(), r.read())
    return out


def test_sweep_from_the_form_draws_live_charts_and_serves_downloads(tmp_path):
    require_chromium()
    env = {"LOCUST_PROMETHEUS_PORT": "0", "LOCUST_INPUT_LEN": "fixed:128",
           "LOCUST_OUTPUT_LEN": "fixed:48", "LOCUST_SHAPE": "concurrency-sweep", "LOCUST_SWEEP_USERS": "1,2,4",
           "LOCUST_STAGE_DURATION": "8", "LOCUST_STAGE_WARMUP": "0", "LOCUST_ATTRIBUTION_WINDOW": "1",
           "LOCUST_SERVER_METRICS_INTERVAL": "0.5"}
    with web_ui_on_sim(tmp_path, "StreamingCompletionUser", env) as (driver, web, proc):
        driver.get(web + "/")
        start_from_ui(driver, 4, 10)
        open_llm_tab(driver)
        wait_for(lambda: driver.find_elements("css selector", "iframe#llm-cockpit"), 20,
                 "the live charts inside the LLM tab")
        try:
            first = wait_for(lambda: (d := _in_cockpit(driver)) and d["points"].get("latency") and d, 90,
                             "the latency chart drawn with data")
        except AssertionError as e:
            raise AssertionError(f"{e}\n--- frames: {_frames(driver)}\n--- locust log ---\n"
                                 f"{proc.output()[-3000:]}") from None
        later = wait_for(
            lambda: (d := _in_cockpit(driver)) and d["polls"] >= first["polls"] + 2
            and d["points"]["latency"] > first["points"]["latency"]
            and d["points"].get("throughput", 0) > first["points"].get("throughput", 0) and d,
            30, "more data points in the live charts after further polls")
        print("points per chart, two polls apart:", first["points"], "->", later["points"])
        assert "users=" in later["status"] and "TIME LEFT" in later["status"].upper(), later["status"]
        assert re.search(r"step \d of 3", later["status"]), later["status"]
        load = wait_for(lambda: (d := _in_cockpit(driver)) and d["points"].get("load-0") and d, 30,
                        "throughput against load, once two stages are measured")
        assert load["points"]["server"] > 0, load  # the scraped KV usage / queue
        driver.set_window_size(1600, 2000)
        time.sleep(2.5)  # one more poll: the frame's height follows its page
        SHOT.parent.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(SHOT))
        print(f"cockpit screenshot: {SHOT}")

        urls = _downloads(driver)
        assert set(TYPES) <= set(urls), urls
        during = _fetch_all({k: urls[k] for k in TYPES})
        for name, (status, ctype, _body) in during.items():
            assert (status, ctype) == (200, TYPES[name]), (name, status, ctype)
        n_during = json.loads(during["summary.json"][2])["requests"]["total"]
        # the sweep ends by itself (3 stages of 8 s); then the files hold the final run
        wait_for(lambda: json.loads(urllib.request.urlopen(web + "/stats/requests", timeout=10).read())["state"]
                 == "stopped", 60, "the sweep to end")
        after = _fetch_all({k: urls[k] for k in TYPES})
        for name, (status, ctype, _body) in after.items():
            assert (status, ctype) == (200, TYPES[name]), (name, status, ctype)
        final = json.loads(after["summary.json"][2])
        assert final["requests"]["total"] > n_during
        assert [st["users"] for st in final["stages"] if not st["warmup"]] == [1, 2, 4]
        assert after["stages.csv"][2].decode().count("\n") == len(final["stages"]) + 1
        open_llm_tab(driver)  # the finished sweep: its stages and the post-run batching verdict, not "no sweep"
        done = wait_for(lambda: (d := _in_cockpit(driver)) and "sweep stopped" in d["status"] and d, 20,
                        "the finished sweep in the stage view")
        assert "3 stage(s) measured: users=1, users=2, users=4" in done["status"], done["status"]
        assert "no sweep shape" not in done["status"] and "batching pending" not in done["status"].split(
            "last live check")[0], done["status"]
        assert "Traceback" not in proc.output(), proc.output()[-3000:]
