"""Shared prefixes and multi-turn conversations, end to end: real ``locust`` processes against the simulator
(which caches full KV blocks and exports vLLM's ``vllm:prefix_cache_queries`` / ``vllm:prefix_cache_hits``).

1. ``--shared-prefix-len 1024 --prefix-groups 2`` in a concurrency sweep: every stage's server prefix-cache hit
   rate (``stages[].prefix_cache_hit_rate``, from the scraped counters) is above 0.5 and TTFT p50 is lower than
   the same sweep sending prompts of the same length without a shared prefix (whose hit rate stays near 0).
2. ``--turns fixed:4`` in a length sweep: the summary's ``turns[]`` has turns 1-4 whose mean prompt tokens grow
   turn by turn, and the client's count of each conversation (history and answers) equals the server's.
"""

from __future__ import annotations

import pytest

from telemetry.outputs.requestlog import read_records
from tests.server.sim.helpers import running_sim
from tests.users.e2e import run_locust

pytestmark = pytest.mark.slow  # every test here starts a real process

MODEL = "deepseek-ai/DeepSeek-V2-Lite"


def _run(port: int, tmp_path, *args: str, groups: set | None = None):
    """The run's summary; with ``groups`` its request log's ``prefix_group`` values must be exactly those."""
    log = tmp_path / "requests.jsonl"
    run = run_locust(f"http://127.0.0.1:{port}", ["--server-metrics-url", f"http://127.0.0.1:{port}/metrics",
                     "--server-metrics-interval", "0.5", "-r", "50", "--llm-requests-jsonl", str(log), *args,
                     "StreamingChatUser"], tmp_path)
    assert run.summary is not None, run.output[-3000:]
    assert run.summary["requests"]["failed"] == 0, run.summary["requests"]
    assert run.summary["tokens"]["prompt_mismatch_ratio"] == 0.0
    if groups is not None:
        assert {line["prefix_group"] for line in read_records(log)} == groups
    return run.summary


def _measured(summary: dict) -> list[dict]:
    """The stages (a user-count change puts a warm-up twin before each)."""
    return [st for st in summary["stages"] if not st["warmup"]]


def test_shared_prefix_hits_the_prefix_cache_and_lowers_ttft(tmp_path):
    sweep = ["--shape", "concurrency-sweep", "--sweep-users", "2,4", "--stage-duration", "3", "--output-len", "fixed:8"]
    # time scale 0.1: the tiny engine's prefill (0.002 ms a token, 256 tokens a step) becomes ~75 ms for 1152
    # tokens, well above the client's own noise on a busy box
    with running_sim("--time-scale", "0.1", "--served-model-name", MODEL, "--tokenizer", "deepseek-v2") as sim:
        plain = _run(sim.port, tmp_path, *sweep, "--input-len", "fixed:1152", groups={None})
        shared = _run(sim.port, tmp_path, *sweep, "--input-len", "fixed:128", "--shared-prefix-len", "1024",
                      "--prefix-groups", "2", groups={0, 1})
    for s, around in ((plain, 0), (shared, 2)):  # 2: "\n\n", what deepseek-v2's template puts after a system prompt
        assert [st["name"] for st in _measured(s)] == ["users=2", "users=4"]
        assert all(st["prompt_tokens_mean"] == 1152 + around for st in _measured(s)), s["stages"]
        assert s["turns"] == []
    hit = [st["prefix_cache_hit_rate"] for st in _measured(shared)]
    miss = [st["prefix_cache_hit_rate"] for st in _measured(plain)]
    assert all(h is not None and h > 0.5 for h in hit), hit
    assert all(m is not None and m < 0.1 for m in miss), miss
    assert shared["ttft_ms"]["p50"] < plain["ttft_ms"]["p50"], (shared["ttft_ms"], plain["ttft_ms"])
    print(f"prefix cache hit rate per stage {hit} vs {miss} without; TTFT p50 {shared['ttft_ms']['p50']:.1f} ms "
          f"vs {plain['ttft_ms']['p50']:.1f} ms")


def test_turns_grow_the_prompt_turn_by_turn(tmp_path):
    with running_sim("--served-model-name", MODEL, "--tokenizer", "deepseek-v2") as sim:
        s = _run(sim.port, tmp_path, "--shape", "length-sweep", "-u", "4", "--length-sweep", "fixed:64,fixed:128",
                 "--stage-duration", "3", "--output-len", "fixed:16", "--turns", "fixed:4", "--think-time",
                 "fixed:0.02", "--shared-prefix-len", "256", "--prefix-groups", "2")
    turns = s["turns"]
    assert [t["turn"] for t in turns] == [1, 2, 3, 4], turns
    assert all(t["requests"] >= 4 and t["ttft_ms"]["count"] == t["requests"] for t in turns), turns
    tokens = [t["prompt_tokens_mean"] for t in turns]
    # each turn adds an answer (16 tokens) and a new message (64 or 128 tokens, template included)
    assert all(80 <= b - a <= 144 for a, b in zip(tokens, tokens[1:], strict=False)), tokens
    assert 256 + 64 <= tokens[0] <= 256 + 128, tokens
    assert sum(t["requests"] for t in turns) == s["requests"]["total"]
    # the history is cached: the second stage's hits include earlier turns, not only the system prompt
    assert all(st["prefix_cache_hit_rate"] > 0.5 for st in _measured(s)), s["stages"]
    print("turns:", [(t["turn"], t["requests"], round(t["ttft_ms"]["p50"], 2), t["prompt_tokens_mean"]) for t in turns])
