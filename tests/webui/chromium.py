"""Headless Chromium (Debian's chromium + chromium-driver) for the web UI tests, and LLM-tab readers.

    with chromium(tmp_path) as driver:
        driver.get(url)
        open_llm_tab(driver)
        rows = llm_table(driver)   # [{"Stage": "main", "TTFT p50 (ms)": "120.0", ...}, ...]
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.requires import SYSTEM_TOOLS, require

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


def start_from_ui(driver, users: int, rate: float, timeout: float = 30.0) -> None:
    """Fill Locust's start form (users, ramp-up) and press START; wait for the tab bar."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    for name, value in (("userCount", users), ("spawnRate", rate)):
        field = wait_for(lambda n=name: driver.find_elements(By.CSS_SELECTOR, f"input[name={n}]"), timeout, name)[0]
        field.send_keys(Keys.CONTROL, "a")
        field.send_keys(Keys.DELETE)
        field.send_keys(str(value))
    submits = driver.find_elements(By.CSS_SELECTOR, "button[type=submit]")
    button = [b for b in submits if b.text.strip().upper() == "START"]
    assert button, "no START button on the start form"
    button[0].click()
    wait_for(lambda: driver.find_elements(By.CSS_SELECTOR, "[role=tab]"), timeout, "the tab bar after START")
