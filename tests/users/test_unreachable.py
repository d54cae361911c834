"""A server that is not there: a headless run says so in one line and exits 2 at start (not thousands of failed
requests a second); a server that dies mid-run keeps being counted as failing, each user backing off between
refused connections."""

from __future__ import annotations

import json
import time
import urllib.request

import pytest

from tests.support import LOCUST, PY, Proc, free_port, wait_http
from users.server_info import unreachable

QUIET = ["--prometheus-port", "0", "--input-len", "fixed:16", "--output-len", "fixed:8", "StreamingChatUser"]


@pytest.mark.parametrize("host, says", [
    (None, "cannot connect (Connection refused); is the server up?"),
    ("127.0.0.1:8000", "not an http(s) URL; expected e.g. http://127.0.0.1:8000"),
])
@pytest.mark.slow
def test_no_server_at_start_is_one_line_and_exit_2(host, says):
    host = host or f"http://127.0.0.1:{free_port()}"
    with Proc([LOCUST, "-f", "locustfile.py", "--headless", "-u", "2", "-r", "2", "-t", "10s", "--host", host,
               *QUIET], name="locust") as p:
        rc = p.wait(60)
        out = p.output()
    assert rc == 2, out[-3000:]
    errors = [line for line in out.splitlines() if "ERROR" in line]
    assert errors == [next(line for line in out.splitlines() if f"LLM users: {host}: {says}" in line)], out
    assert "LLM summary" not in out and "Ramping" not in out


def test_unreachable_names_what_is_wrong():
    assert unreachable("localhost:8000") == "not an http(s) URL; expected e.g. http://127.0.0.1:8000"
    assert unreachable("http://") == "not an http(s) URL; expected e.g. http://127.0.0.1:8000"
    assert unreachable("http://127.0.0.1:99999") == "a bad port"
    assert "cannot connect" in unreachable(f"http://127.0.0.1:{free_port()}")


@pytest.mark.slow
def test_a_server_that_dies_mid_run_is_counted_with_a_back_off(tmp_path):
    port = free_port()
    host = f"http://127.0.0.1:{port}"
    summary = tmp_path / "s.json"
    with Proc([PY, "-m", "server.scripted", "--port", str(port), "--ttft-ms", "20", "--itl-ms", "5",
               "--output-tokens", "8"], name="scripted") as server:
        wait_http(f"{host}/health", proc=server)
        with Proc([LOCUST, "-f", "locustfile.py", "--headless", "-u", "4", "-r", "4", "-t", "14s", "--host", host,
                   "--server-metrics-url", "off", "--llm-summary-json", str(summary), *QUIET], name="locust") as run:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:  # some answers first
                with urllib.request.urlopen(f"{host}/stats", timeout=5) as r:
                    if json.loads(r.read()).get("completed", 0) >= 8:
                        break
                time.sleep(0.2)
            server.stop()
            rc = run.wait(90)
            out = run.output()
    s = json.loads(summary.read_text())
    assert rc == 1 and s["requests"]["ok"] >= 8, out[-3000:]
    refused = s["requests"]["errors"].get("connection", 0)
    assert refused > 0, s["requests"]
    # without a back-off 4 users met ~2,000 refusals a second; with it each waits 0.05, 0.1, ... up to 2 s: in at
    # most 14 s dead, 6 refusals in the first 3.15 s, then one per 2 s
    assert refused <= 4 * (6 + 14 / 2 + 1), (refused, s["requests"])
