"""KV-cache pressure on the real engine: an 8 MB KV pool (4,096 tokens) and 32 streams of 192 tokens.

32 x (64 + 128) = 6,144 tokens want 1.5 times the pool, so vLLM fills it, queues requests and preempts
running ones. The summary must show what the server went through: KV usage near 1, waiting
requests, preemptions > 0 — while every request still completes with exactly max_tokens.
Runs last (file name), after the light tests that share this server.
"""

from __future__ import annotations

import pytest

from tests.vllm.engine import Server
from tests.vllm.locust_run import run_local

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

INPUT, OUTPUT, USERS = 64, 128, 32


def test_small_kv_pool_saturates_and_preempts(vllm_small_kv: Server, tmp_path):
    extra = ["--input-len", f"fixed:{INPUT}", "--output-len", f"fixed:{OUTPUT}", "--seed", "5"]
    run = run_local(vllm_small_kv.url, tmp_path, "StreamingCompletionUser", users=USERS, seconds=15, extra=extra)
    s = run.summary
    assert s["requests"]["failed"] == 0, s["requests"]
    assert s["requests"]["ok"] >= USERS  # every user finished at least its first request
    assert s["tokens"]["output"] == s["requests"]["ok"] * OUTPUT  # preempted requests still end whole

    srv = s["server"]
    assert srv["metric_names"] == "vllm-v1"
    assert srv["kv_cache_usage"]["max"] >= 0.9, srv
    assert srv["preemptions"] > 0, srv
    assert srv["requests_waiting_max"] >= 1, srv
    stage = s["stages"][0]
    # The stage's delta spans its own window; the server section's spans the first to the last scrape, and the last
    # comes after the stop, when vLLM may still preempt the requests it is aborting (a CI run: 17 in the stage, 18).
    assert 0 < stage["preemptions"] <= srv["preemptions"], (stage["preemptions"], srv)
    print(
        f"\nKV pressure: {s['requests']['ok']} requests, {s['tokens']['output_per_s']:.0f} output tok/s, "
        f"KV max {srv['kv_cache_usage']['max']:.2f}, waiting max {srv['requests_waiting_max']}, "
        f"preemptions {srv['preemptions']} (the stage's window: {stage['preemptions']})"
    )
