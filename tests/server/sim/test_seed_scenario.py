"""The reference chat scenario in real time: 16 users started together, 512 in / 256 out, ignore_eos, about a minute.

Run through the project's own Locust users (``StreamingCompletionUser``) against each seed profile, and
compared with the reference table: output tok/s within 10 %, P99 TTFT within 15 % below and 35 %
above. The P99 comes from the start burst, so the run length is part of the scenario (60 s, as ``make run``).
Measured on this project's shared 2-core machine: V2-Lite 1839 tok/s and 438 ms, V2 958 tok/s and 775 ms
(the P99 moves ~±7 % from run to run with how far apart the 16 first requests reach the server). Under
heavy machine load (a load average of 5-6) the P99s came out 20-25 % higher, hence 35 % above.
The profiles themselves are checked against the table in
virtual time (test_profiles.py); V2-Lite runs here in make test, V2 in make test-long.
"""

from __future__ import annotations

import json

import pytest

from tests.support import LOCUST, PY, ROOT, Proc, free_port, wait_http

pytestmark = pytest.mark.slow

SEED_TABLE = {"deepseek-v2-lite-a100": (1842.0, 412.0), "deepseek-v2-a100": (956.0, 789.0)}


@pytest.mark.parametrize("profile", [
    # both profiles' table figures are checked in virtual time in make test (test_profiles.py); these real-time
    # minutes run in make test-long: beside make test's other processes on 2 cores the simulator's own steps run
    # late (V2-Lite's P99 TTFT read 628 ms against the table's 412), which says nothing about the profile
    pytest.param("deepseek-v2-lite-a100", marks=pytest.mark.long),
    pytest.param("deepseek-v2-a100", marks=pytest.mark.long),
])
def test_seed_scenario_through_the_locust_users(tmp_path, profile):
    tok_s, p99 = SEED_TABLE[profile]
    port = free_port()
    with Proc([PY, "-m", "server.sim", "--port", str(port), "--profile", profile], name="sim") as sim:
        wait_http(f"http://127.0.0.1:{port}/health", proc=sim)
        out = tmp_path / "summary.json"
        with Proc([LOCUST, "-f", str(ROOT / "locustfile.py"), "--headless", "-u", "16", "-r", "16", "-t", "60s",
                   "--stop-timeout", "30", "--host", f"http://127.0.0.1:{port}", "--only-summary",
                   "--input-len", "fixed:512", "--output-len", "fixed:256", "--ignore-eos",
                   "--prometheus-port", "0", "--llm-summary-json", str(out), "StreamingCompletionUser"],
                  name="locust") as loc:
            loc.wait(150)
            log = loc.output()
    s = json.loads(out.read_text())
    got_tok_s, got_p99 = s["tokens"]["output_per_s"], s["ttft_ms"]["p99"]
    figures = f"{profile}: {got_tok_s:.0f} tok/s (seed {tok_s:.0f}), P99 TTFT {got_p99:.0f} ms (seed {p99:.0f})"
    print(figures)
    assert s["requests"]["failed"] == 0 and s["tokens"]["source"] == "usage", log[-3000:]
    assert s["tokens"]["prompt"] == 512 * s["requests"]["ok"]
    assert abs(got_tok_s / tok_s - 1) < 0.10, figures
    assert 0.85 < got_p99 / p99 < 1.35, figures
