"""The start form as a new user meets it: in headless Chromium, ``foo:1`` typed into the input length
field and START pressed shows the option's name and its accepted forms under the form, and nothing starts; the
API key's field comes empty (the key given at start is not in the page)."""

from __future__ import annotations

import json
import urllib.request

import pytest

from tests.support import LOCUST, Proc, free_port, wait_http
from tests.webui.chromium import chromium, form_field, press_start, require_chromium, type_into, wait_for

pytestmark = pytest.mark.slow

KEY = "sk-browser-5e1d7c3b9a"


def test_bad_input_len_in_the_browser_is_refused_with_the_accepted_forms(tmp_path):
    require_chromium()
    from selenium.webdriver.common.by import By  # noqa: PLC0415

    port = free_port()
    web = f"http://127.0.0.1:{port}"
    proc = Proc([LOCUST, "-f", "locustfile.py", "--web-host", "127.0.0.1", "--web-port", str(port), "--host",
                 "http://127.0.0.1:9", "--prometheus-port", "0", "--server-metrics-url", "off", "--api-key", KEY],
                name="locust-web")
    with proc, chromium(tmp_path) as driver:
        wait_http(web + "/", timeout=60, proc=proc)
        driver.get(web + "/")
        assert KEY not in driver.page_source

        # the form sends it as input_len
        box = wait_for(lambda: form_field(driver, "inputLen"), 20, "the input length field")
        assert (form_field(driver, "apiKey").get_attribute("value") or "") == ""
        type_into(box, "foo:1")
        press_start(driver)
        shown = wait_for(lambda: "--input-len:" in driver.find_element(By.TAG_NAME, "body").text and
                         driver.find_element(By.TAG_NAME, "body").text, 20, "the refusal under the form")
        assert "unknown length SPEC 'foo:1'; expected one of fixed:N, uniform:LO:HI" in shown, shown[-2000:]
        with urllib.request.urlopen(web + "/stats/requests", timeout=10) as r:
            state = json.loads(r.read())
        assert state["state"] == "ready" and state["user_count"] == 0 and proc.alive()
