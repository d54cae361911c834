"""A time-scaled simulator run (``--time-scale 10``) read by a real locust run: the server's histograms are in the
wall-clock seconds the clients experience, so the attribution adds up (issue #19's "must show").

Before, the server exported simulated seconds (10× the wall time): "client TTFT mean 9 ms = server queue 12 +
prefill 30 + … network & client −33 ms; ITL mean client 0.9 ms vs server 9.2 ms".
"""

from __future__ import annotations

import json

import pytest

from tests.support import LOCUST, PY, Proc, free_port, wait_http

pytestmark = pytest.mark.slow


def test_time_scaled_sim_attribution_adds_up(tmp_path):
    port = free_port()
    sim_argv = [PY, "-m", "server.sim", "--host", "127.0.0.1", "--port", str(port), "--profile",
                "deepseek-v2-lite-a100", "--time-scale", "10"]
    with Proc(sim_argv, name="sim") as sim:
        wait_http(f"http://127.0.0.1:{port}/health", proc=sim)
        out = tmp_path / "summary.json"
        argv = [LOCUST, "-f", "locustfile.py", "--headless", "--host", f"http://127.0.0.1:{port}", "--only-summary",
                "--prometheus-port", "0", "--llm-summary-json", str(out), "--input-len", "fixed:256",
                "--output-len", "fixed:128", "--server-metrics-interval", "0.5", "-u", "4", "-r", "4", "-t", "8s",
                "StreamingCompletionUser"]
        with Proc(argv, name="locust") as loc:
            loc.wait(60)
            log = loc.output()
    assert out.exists(), log[-3000:]
    s = json.loads(out.read_text())
    d = s["attribution"]["decomposition"]
    assert s["requests"]["ok"] > 20 and s["server"]["scrapes"] > 0, log[-3000:]
    means = {k: d[k]["mean"] for k in ("ttft_client_ms", "ttft_server_ms", "queue_ms", "prefill_ms",
                                        "itl_client_ms", "decode_itl_server_ms")}
    print("time-scale 10:", d["statement"], means)
    # no material negative term, and the server's TTFT parts fit inside the client's TTFT. vLLM (and the sim)
    # observe TTFT at the first token but queue and prefill at the request's end, so a scrape window's means
    # cover slightly different requests: an excess within 5 % of the server's TTFT is that (measured 0.9-1.4 %),
    # not a clock error (a time-scale bug put the server's durations 10x off the client's)
    excess = d["remainder_ms"].get("excess_ms", {})
    assert "network_client" not in excess and excess.get("server_other", 0) <= 0.05 * means["ttft_server_ms"], d
    assert "exceed" not in d["statement"], d["statement"]  # below 1 ms: not worth a clause
    assert all(v is not None and v >= 0 for v in means.values()), means
    assert min(d["remainder_ms"]["network_client"], d["remainder_ms"]["server_other"]) >= 0, d["remainder_ms"]
    assert means["queue_ms"] + means["prefill_ms"] <= means["ttft_server_ms"] * 1.05 <= means["ttft_client_ms"]
    # the client's and the server's mean ITL agree within 10 % (they were 10× apart)
    client, server = means["itl_client_ms"], means["decode_itl_server_ms"]
    assert abs(client - server) <= 0.10 * server, (client, server)
