"""Headless Chromium (Debian's chromium + chromium-driver) for the web UI tests, the start form's drivers and
LLM-tab readers.

    with chromium(tmp_path) as driver:
        driver.get(url)
        open_llm_tab(driver)
        rows = llm_table(driver)   # [{"Stage": "main", "TTFT p50 (ms)": "120.0", ...}, ...]

    with web_ui_on_sim(tmp_path, "StreamingChatUser", {"LOCUST_INPUT_LEN": "fixed:128"}) as (driver, web, proc):
        driver.get(web + "/")
        type_into(wait_for(lambda: form_field(driver, "sloTtftP99Ms"), 20, "the field"), "5000")
        start_from_ui(driver, 4, 4)
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.requires import SYSTEM_TOOLS, require
from tests.support import LOCUST, PY, ROOT, Proc, free_port, wait_http

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--window-size=1600,1000",
]
SIM_PROFILE = "deepseek-v2-lite-a100"
"""The simulator's profile the web UI runs drive."""
CUSTOM_SECTION = ("Custom parameters", "Advanced options")
"""The start form's collapsed section holding the project's options (its title in Locust's versions)."""


def require_chromium() -> None:
    """Skip when Debian's chromium / chromium-driver are absent (fail under REQUIRE_SYSTEM_TOOLS=1)."""
    missing = [path for path in (CHROMIUM, CHROMEDRIVER) if not Path(path).exists()]
    reason = f"{', '.join(missing)} missing: install Debian's chromium and chromium-driver (make system-deps)"
    require(reason if missing else None, SYSTEM_TOOLS)


@contextmanager
def chromium(tmp: Path) -> Iterator:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp / 'chromium-profile'}")
    service = Service(executable_path=CHROMEDRIVER, log_output=str(tmp / "chromedriver.log"))
    driver = webdriver.Chrome(options=options, service=service)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


@contextmanager
def web_ui_on_sim(tmp: Path, user_class: str | None, env: dict[str, str],
                  profile: str = SIM_PROFILE) -> Iterator[tuple]:
    """The simulator, a Locust web UI against it (``locustfile.py``; ``user_class``, else every class; options
    from ``env``'s LOCUST_* variables) and headless Chromium, each stopped on the way out: yields (driver, the web
    UI's URL, the Locust process)."""
    sim_port, port = free_port(), free_port()
    with Proc([PY, "-m", "server.sim", "--host", "127.0.0.1", "--port", str(sim_port), "--profile", profile],
              name="sim") as sim:
        wait_http(f"http://127.0.0.1:{sim_port}/health", timeout=60, proc=sim)
        argv = [LOCUST, "-f", "locustfile.py", "--web-host", "127.0.0.1", "--web-port", str(port), "--host",
                f"http://127.0.0.1:{sim_port}", *([user_class] if user_class else [])]
        with Proc(argv, name="locust-web", env={"PYTHONPATH": str(ROOT), **env}) as proc, chromium(tmp) as driver:
            web = f"http://127.0.0.1:{port}"
            wait_http(web + "/", timeout=60, proc=proc)
            yield driver, web, proc


def wait_for(fn, timeout: float, what: str, interval: float = 0.3):
    """Poll ``fn`` until it returns something truthy; fail naming ``what``."""
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            value = fn()
            if value:
                return value
        except Exception as e:  # stale elements while React re-renders
            last_error = e
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last error: {last_error})")


def open_llm_tab(driver, timeout: float = 30.0) -> None:
    """Click the tab titled "LLM" in Locust's tab bar (it appears once a test has started)."""
    from selenium.webdriver.common.by import By

    def tabs():
        return [t for t in driver.find_elements(By.CSS_SELECTOR, "[role=tab]") if t.text.strip().upper() == "LLM"]

    try:
        tab = wait_for(tabs, timeout, "the LLM tab in the tab bar")[0]
    except AssertionError as e:
        seen = [t.text for t in driver.find_elements(By.CSS_SELECTOR, "[role=tab]")]
        page = driver.find_element(By.TAG_NAME, "body").text[:500]
        raise AssertionError(f"{e}; tabs seen: {seen}; page text: {page!r}") from None
    tab.click()
    wait_for(lambda: "tab=llm" in driver.current_url, 10, "the URL to select tab=llm")


def llm_table(driver) -> list[dict[str, str]]:
    """The table on the current tab as dicts keyed by column title."""
    from selenium.webdriver.common.by import By

    heads = [h.text.strip() for h in driver.find_elements(By.CSS_SELECTOR, "table thead th")]
    rows = []
    for tr in driver.find_elements(By.CSS_SELECTOR, "table tbody tr"):
        cells = [td.text.strip() for td in tr.find_elements(By.CSS_SELECTOR, "td")]
        rows.append(dict(zip(heads, cells, strict=False)))
    return rows


def form_field(driver, name: str):
    """The start form's input or select ``name`` once it shows (the project's options sit in a collapsed section:
    opened here when the field is hidden); None until then."""
    from selenium.webdriver.common.by import By

    def shown():
        return [f for f in driver.find_elements(By.CSS_SELECTOR, f"input[name={name}], select[name={name}]")
                if f.is_displayed()]

    if not shown():
        for toggle in driver.find_elements(By.CSS_SELECTOR, "[aria-expanded=false]"):
            if toggle.is_displayed() and toggle.text.strip() in CUSTOM_SECTION:
                toggle.click()
    found = shown()
    return found[0] if found else None


def type_into(field, value: object) -> None:
    """Replace what a form field holds with ``value``, as a person would (select all, delete, type)."""
    from selenium.webdriver.common.keys import Keys

    field.send_keys(Keys.CONTROL, "a")
    field.send_keys(Keys.DELETE)
    field.send_keys(str(value))


def press_start(driver) -> None:
    """Press the start form's START button."""
    from selenium.webdriver.common.by import By

    submits = driver.find_elements(By.CSS_SELECTOR, "button[type=submit]")
    button = [b for b in submits if b.text.strip().upper() == "START"]
    assert button, "no START button on the start form"
    button[0].click()


def start_from_ui(driver, users: int, rate: float, timeout: float = 30.0) -> None:
    """Fill Locust's start form (users, ramp-up) and press START; wait for the tab bar."""
    from selenium.webdriver.common.by import By

    for name, value in (("userCount", users), ("spawnRate", rate)):
        type_into(wait_for(lambda n=name: form_field(driver, n), timeout, name), value)
    press_start(driver)
    wait_for(lambda: driver.find_elements(By.CSS_SELECTOR, "[role=tab]"), timeout, "the tab bar after START")
