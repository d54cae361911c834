"""End to end against the simulator with spans (issue 18's "must show"): locust's OTLP receiver
(``--otlp-receiver``) gets the simulator's ``llm_request`` spans (``--otlp-traces-endpoint``) and joins
every completed request with its span; per request the server's TTFT and E2E stay within the client's;
with ``--batch-cap-at`` the slowest TTFTs are mostly queue; a full KV cache is named as the bottleneck.
"""

from __future__ import annotations

import json

import pytest

from tests.support import LOCUST, PY, Proc, free_port, wait_http

pytestmark = pytest.mark.slow

COMMON = ["--input-len", "fixed:64", "--output-len", "fixed:32", "--attribution-window", "2",
          "--server-metrics-interval", "0.5", "--model", "sim-tiny", "--otlp-grace", "5",
          "--stop-timeout", "30"]  # fmt: skip


def _run(tmp_path, sim_args: list[str], locust_args: list[str], workers: int = 0, timeout: float = 90.0) -> dict:
    port, rx = free_port(), free_port()
    sim_argv = [PY, "-m", "server.sim", "--host", "127.0.0.1", "--port", str(port), "--profile", "cpu-tiny",
                "--otlp-traces-endpoint", f"http://127.0.0.1:{rx}/v1/traces", *sim_args]  # fmt: skip
    with Proc(sim_argv, name="sim") as sim:
        wait_http(f"http://127.0.0.1:{port}/health", proc=sim)
        out = tmp_path / "summary.json"
        base = [LOCUST, "-f", "locustfile.py", "--host", f"http://127.0.0.1:{port}"]
        argv = [*base, "--headless", "--only-summary", "--prometheus-port", "0", "--llm-summary-json", str(out),
                "--otlp-receiver", str(rx), *COMMON, *locust_args, "StreamingChatUser"]  # fmt: skip
        procs = []
        if workers:
            mport = free_port()
            argv += ["--master", "--master-bind-host", "127.0.0.1", "--master-bind-port", str(mport),
                     "--expect-workers", str(workers)]  # fmt: skip
            for i in range(workers):
                procs.append(Proc([*base, "--worker", "--master-host", "127.0.0.1", "--master-port", str(mport),
                                   "StreamingChatUser"], name=f"worker{i}"))  # fmt: skip
        with Proc(argv, name="locust") as loc:
            loc.wait(timeout)
            log = loc.output()
        for p in procs:
            p.wait(30)
            p.stop()
        assert out.exists(), log[-3000:]
        return json.loads(out.read_text())


def _all_joined(s: dict) -> dict:
    t = s["traces"]
    ok = s["requests"]["ok"]
    assert ok >= 10 and s["requests"]["failed"] == 0
    assert t["joined"] == ok, t
    assert t["unmatched"] == 0 and t["requests_unjoined"] == 0 and t["bad_exports"] == 0, t
    assert t["spans"] == ok
    # per request: the server's TTFT and E2E never exceed the client's
    assert t["server_ttft_over_client"] == 0 and t["server_e2e_over_client"] == 0, t
    assert t["remainder_min_ms"]["ttft"] >= 0 and t["remainder_min_ms"]["e2e"] >= 0, t
    for row in t["slowest"]["ttft"]:
        assert row["server_ttft_ms"] <= row["client_ttft_ms"] and row["server_e2e_ms"] <= row["client_e2e_ms"], row
        assert row["queue_ms"] + row["prefill_ms"] <= row["server_ttft_ms"] + 1e-3
    return t


def test_batch_cap_tail_is_queue_and_every_request_joins(tmp_path):
    # from second 4 on the sim runs one sequence at a time: the 8 users queue behind it
    s = _run(tmp_path, ["--batch-cap-at", "4:1"], ["-u", "8", "-r", "8", "-t", "10s"])
    t = _all_joined(s)
    tail = t["tail"]["ttft"]
    assert tail["dominant"] == "queue", tail
    assert tail["shares"]["queue"] > 0.5 and tail["negative_parts"] == 0
    assert "queue" in tail["statement"].split(":")[1].split(",")[0], tail["statement"]
    assert len(t["slowest"]["ttft"]) == 10
    att = s["attribution"]
    assert att["tail"]["source"] == "spans" and att["tail"]["ttft"]["dominant"] == "queue"
    assert att["bottleneck"]["cause"] in ("queueing", "batching_collapse"), att["bottleneck"]


def test_distributed_run_joins_every_request(tmp_path):
    s = _run(tmp_path, [], ["-u", "4", "-r", "4", "-t", "5s"], workers=1)
    t = _all_joined(s)
    assert t["tail"]["ttft"]["requests"] >= 1
