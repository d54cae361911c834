"""The report in a real Locust web UI (locustfile wiring included): ``/llm/report`` while a test runs."""

from __future__ import annotations

import re
import time
import urllib.request

import pytest

from tests.support import LOCUST, PY, Proc, free_port, wait_http

pytestmark = pytest.mark.slow


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as r:
        assert r.status == 200 and r.headers.get_content_type() == "text/html"
        return r.read().decode("utf-8")


def test_web_ui_serves_a_live_report(tmp_path):
    sim_port, web_port = free_port(), free_port()
    with Proc([PY, "-m", "server.sim", "--host", "127.0.0.1", "--port", str(sim_port), "--profile", "cpu-tiny"],
              name="sim") as sim:
        wait_http(f"http://127.0.0.1:{sim_port}/health", proc=sim)
        with Proc([LOCUST, "-f", "locustfile.py", "--web-host", "127.0.0.1", "--web-port", str(web_port),
                   "--host", f"http://127.0.0.1:{sim_port}", "--autostart", "-u", "4", "-r", "4", "-t", "60s",
                   "--prometheus-port", "0", "--model", "sim-tiny", "--input-len", "fixed:64",
                   "--output-len", "fixed:32", "--attribution-window", "1", "StreamingChatUser"],
                  name="locust") as loc:
            wait_http(f"http://127.0.0.1:{web_port}/", proc=loc)
            url = f"http://127.0.0.1:{web_port}/llm/report"
            deadline, html = time.monotonic() + 40, ""
            while time.monotonic() < deadline:
                html = _get(url)
                if "Client latency per 1 s window" in html and re.search(r"requests</div><div class=\"v\">[1-9]", html):
                    break
                time.sleep(0.5)
            else:
                pytest.fail(f"the live report never showed traffic:\n{html[:2000]}\n{loc.output()[-2000:]}")
            first = int(re.search(r'requests</div><div class="v">([\d,]+)', html).group(1).replace(",", ""))
            later, deadline = first, time.monotonic() + 20  # a later render counts more (was a 2.5 s sleep)
            while later <= first and time.monotonic() < deadline:
                time.sleep(0.5)
                later = int(re.search(r'requests</div><div class="v">([\d,]+)', _get(url)).group(1).replace(",", ""))
            assert later > first  # rendered from the live hub, not a stale file
            assert "TTFT distribution" in html and "sim-tiny" in html
