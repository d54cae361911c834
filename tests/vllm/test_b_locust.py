"""End to end through ``locust -f locustfile.py`` against the real vLLM engine (8 MB KV pool, lightly loaded).

Each user class runs headless for a short while; one run is a master + 1 worker. The checks are the
measurement definitions of DESIGN.md seen on a real server: TTFT < E2E, mean TPOT ~ mean ITL,
output tokens == max_tokens under ignore_eos, prompt tokens == the server's usage (chat template
included), one Locust request per LLM request, and the server's gauges relayed.
"""

from __future__ import annotations

import re

import pytest

from tests.vllm.engine import Server
from tests.vllm.locust_run import LocustRun, run_distributed, run_local, scrape

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

INPUT, OUTPUT, BATCH = 64, 32, 2
LENGTHS = ["--input-len", f"fixed:{INPUT}", "--output-len", f"fixed:{OUTPUT}", "--seed", "3"]
SECONDS = 15


def check_requests(run: LocustRun, batch: int = 1) -> dict:
    s = run.summary
    req = s["requests"]
    assert req["failed"] == 0, (req, run.output[-3000:])
    assert req["ok"] == req["total"] >= 3
    # ONE Locust request event per LLM request: Locust's own count equals ours
    assert sum(e["num_requests"] for e in run.stats) == req["total"]
    assert sum(e["num_failures"] for e in run.stats) == 0
    # ignore_eos: every request produced exactly max_tokens per prompt (server usage)
    assert s["tokens"]["source"] == "usage"
    assert s["tokens"]["output"] == req["ok"] * OUTPUT * batch
    assert s["tokens"]["output_per_s"] > 0
    return s


def check_prompt_tokens(s: dict, batch: int = 1) -> None:
    """The server's usage.prompt_tokens (summed) == the drawn length per prompt, and the client's own count
    agrees (mismatch ~0). For chat the client counts the rendered template (BOS, <｜User｜>,
    <｜Assistant｜>) as the server does; test_a_engine checks that accounting on single requests."""
    assert s["tokens"]["prompt"] == s["requests"]["ok"] * INPUT * batch
    assert abs(s["tokens"]["prompt_mismatch_ratio"]) < 0.01
    for stage in s["stages"]:  # per prompt, whatever the batch
        assert stage["prompt_tokens_mean"] == pytest.approx(INPUT)


def check_stream_timing(s: dict) -> None:
    n = s["requests"]["ok"]
    ttft, e2e, tpot, itl = s["ttft_ms"], s["e2e_ms"], s["tpot_ms"], s["itl_ms"]
    assert ttft["count"] == e2e["count"] == tpot["count"] == n
    assert itl["count"] == n * (OUTPUT - 1)  # one sample per token after the first
    assert 0 < ttft["mean"] < e2e["mean"]
    assert ttft["p50"] < e2e["p50"] and ttft["max"] <= e2e["max"] * 1.01
    # same output length everywhere: mean TPOT and mean ITL measure the same gaps
    assert abs(tpot["mean"] - itl["mean"]) <= 0.2 * itl["mean"], (tpot, itl)
    # decode span = TPOT * (n - 1), and it fits inside E2E
    assert s["decode_span_ms"]["mean"] == pytest.approx(tpot["mean"] * (OUTPUT - 1), rel=0.05)
    assert s["decode_span_ms"]["mean"] < e2e["mean"]


def check_server(s: dict) -> None:
    srv = s["server"]
    assert srv["metric_names"] == "vllm-v1"
    assert 0 < srv["kv_cache_usage"]["max"] <= 1.0  # real usage seen while requests ran
    assert 0 <= srv["kv_cache_usage"]["mean"] <= srv["kv_cache_usage"]["max"]
    assert srv["requests_waiting_max"] is not None and srv["requests_waiting_max"] >= 0
    assert srv["preemptions"] == 0  # 4 x 96 tokens use under 10% of the 4,096-token pool: no pressure


@pytest.mark.parametrize("user_class", ["StreamingChatUser", "StreamingCompletionUser"])
def test_streaming_user(vllm_server: Server, tmp_path, user_class: str):
    run = run_local(vllm_server.url, tmp_path, user_class, users=4, seconds=SECONDS, extra=LENGTHS)
    s = check_requests(run)
    check_prompt_tokens(s)
    check_stream_timing(s)
    check_server(s)
    print(f"\n{user_class}: {s['requests']['ok']} requests, {s['tokens']['output_per_s']:.0f} output tok/s, "
          f"TTFT p50 {s['ttft_ms']['p50']:.0f} ms, ITL mean {s['itl_ms']['mean']:.1f} ms")  # fmt: skip


def test_batch_completion_user(vllm_server: Server, tmp_path):
    extra = [*LENGTHS, "--batch-size", str(BATCH)]
    run = run_local(vllm_server.url, tmp_path, "BatchCompletionUser", users=2, seconds=SECONDS, extra=extra)
    s = check_requests(run, batch=BATCH)
    check_prompt_tokens(s, batch=BATCH)
    assert s["e2e_ms"]["count"] == s["requests"]["ok"] and s["e2e_ms"]["mean"] > 0
    assert s["ttft_ms"]["count"] == 0  # not streamed: no first-token time to claim
    check_server(s)


_RELAYED = ("llm_server_kv_cache_usage_ratio", "llm_server_requests_running", "llm_server_requests_waiting")


def _relayed_values(text: str) -> dict[str, float]:
    out = {}
    for name in _RELAYED:
        m = re.search(rf"^{name}(?:{{[^}}]*}})? ([0-9.eE+-]+)$", text, flags=re.M)
        if m:
            out[name] = float(m.group(1))
    return out


def test_master_and_one_worker(vllm_server: Server, tmp_path):
    run = run_distributed(
        vllm_server.url, tmp_path, "StreamingChatUser", users=4, seconds=SECONDS, extra=LENGTHS, while_running=scrape
    )
    s = check_requests(run)
    assert s["workers"] == 1
    check_prompt_tokens(s)
    check_stream_timing(s)
    check_server(s)
    # the master's exporter relays the server's gauges live: seen with a non-zero KV fill and running count
    seen = [_relayed_values(t) for t in run.samples]
    assert any(set(v) == set(_RELAYED) for v in seen), run.samples[-1:] or "exporter never answered"
    assert any(v.get("llm_server_kv_cache_usage_ratio", 0) > 0 for v in seen)
    assert any(v.get("llm_server_requests_running", 0) >= 1 for v in seen)
