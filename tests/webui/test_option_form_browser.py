"""The start form as a new user meets it: in headless Chromium, ``foo:1`` typed into the input length
field and START pressed shows the option's name and its accepted forms under the form, and nothing starts; the
API key's field comes empty (the key given at start is not in the page)."""

from __future__ import annotations

import json
import urllib.request

import pytest

from tests.support import LOCUST, Proc, free_port, wait_http
from tests.webui.chromium import chromium, require_chromium, wait_for

pytestmark = pytest.mark.slow

KEY = "sk-browser-5e1d7c3b9a"


def test_bad_input_len_in_the_browser_is_refused_with_the_accepted_forms(tmp_path):
    require_chromium()
    from selenium.webdriver.common.by import By  # noqa: PLC0415
    from selenium.webdriver.common.keys import Keys  # noqa: PLC0415

    port = free_port()
    web = f"http://127.0.0.1:{port}"
    proc = Proc([LOCUST, "-f", "locustfile.py", "--web-host", "127.0.0.1", "--web-port", str(port), "--host",
                 "http://127.0.0.1:9", "--prometheus-port", "0", "--server-metrics-url", "off", "--api-key", KEY],
                name="locust-web")
    with proc, chromium(tmp_path) as driver:
        wait_http(web + "/", timeout=60, proc=proc)
        driver.get(web + "/")
        assert KEY not in driver.page_source

        def field(name):
            found = driver.find_elements(By.CSS_SELECTOR, f"input[name={name}]")
            if not found or not found[0].is_displayed():  # the custom parameters sit in a collapsed section
                for toggle in driver.find_elements(By.CSS_SELECTOR, "[aria-expanded=false]"):
                    if toggle.is_displayed() and toggle.text.strip() in ("Advanced options", "Custom parameters"):
                        toggle.click()
                found = driver.find_elements(By.CSS_SELECTOR, f"input[name={name}]")
            return found[0] if found and found[0].is_displayed() else None

        box = wait_for(lambda: field("inputLen"), 20, "the input length field")  # the form sends it as input_len
        assert (field("apiKey").get_attribute("value") or "") == ""
        box.send_keys(Keys.CONTROL, "a")
        box.send_keys(Keys.DELETE)
        box.send_keys("foo:1")
        submits = driver.find_elements(By.CSS_SELECTOR, "button[type=submit]")
        start = [b for b in submits if b.text.strip().upper() == "START"]
        start[0].click()
        shown = wait_for(lambda: "--input-len:" in driver.find_element(By.TAG_NAME, "body").text and
                         driver.find_element(By.TAG_NAME, "body").text, 20, "the refusal under the form")
        assert "unknown length SPEC 'foo:1'; expected one of fixed:N, uniform:LO:HI" in shown, shown[-2000:]
        with urllib.request.urlopen(web + "/stats/requests", timeout=10) as r:
            state = json.loads(r.read())
        assert state["state"] == "ready" and state["user_count"] == 0 and proc.alive()
