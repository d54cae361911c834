"""A dataset's multi-turn conversations replayed against the real vLLM engine (``--dataset``): its own prefix cache
counters (``vllm:prefix_cache_queries`` / ``_hits``, scraped into ``stages[].prefix_cache_hit_rate``) hit above
0.5, where synthetic prompts of about the same lengths from ``--input-len`` hit near 0; the server counts the
prompts (the chat template over the whole history) as the client does."""

from __future__ import annotations

import json

import pytest

from tests.vllm.engine import Server
from tests.vllm.locust_run import run_local

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

SECONDS = 15
TURNS = 8
SENTENCE = "the queue drained after the restart and the cache warmed again while the shift went on"


def _sharegpt(path) -> None:
    """Four conversations of eight turns, about 40 tokens a question and 55 an answer: each turn's prompt holds the
    previous turn's whole prompt (cached by the engine in full 16-token blocks), so about three quarters of the
    prompt tokens can hit (about 2,400 of 3,200 by that count; 0.57 measured with six turns); the last prompt stays
    near 750 tokens, two conversations far inside the 4,096-token pool."""
    rows = []
    for i in range(4):
        conv = []
        for t in range(TURNS):
            conv += [{"from": "human", "value": f"conversation {i} question {t}: {SENTENCE} {SENTENCE}"},
                     {"from": "gpt", "value": f"answer {t} of {i}: {SENTENCE} {SENTENCE} {SENTENCE}"}]
        rows.append({"conversations": conv})
    path.write_text(json.dumps(rows), encoding="utf-8")


def test_replayed_conversations_hit_the_engines_prefix_cache(vllm_server: Server, tmp_path):
    data = tmp_path / "chats.json"
    _sharegpt(data)
    (tmp_path / "replay").mkdir()
    (tmp_path / "synthetic").mkdir()
    # a request budget, not a clock: of 2 x TURNS requests one user sent at least TURNS, all turns of its first
    # conversation, however slow a busy box makes the engine (15 s reached only turn 4 beside the rest of the suite)
    replay = run_local(vllm_server.url, tmp_path / "replay", "StreamingChatUser", 2, 4 * SECONDS,
                       ["--dataset", str(data), "--think-time", "fixed:0.05", "--num-requests", str(2 * TURNS)]).summary
    assert replay["requests"]["failed"] == 0 and replay["requests"]["ok"] >= 8, replay["requests"]
    assert abs(replay["tokens"]["prompt_mismatch_ratio"]) < 0.01, replay["tokens"]
    assert [t["turn"] for t in replay["turns"]] == list(range(1, TURNS + 1))
    mean = round(replay["tokens"]["prompt"] / replay["requests"]["ok"])
    synthetic = run_local(vllm_server.url, tmp_path / "synthetic", "StreamingChatUser", 2, SECONDS,
                          ["--input-len", f"fixed:{mean}", "--output-len", "fixed:40"]).summary
    hit = [st["prefix_cache_hit_rate"] for st in replay["stages"]]
    miss = [st["prefix_cache_hit_rate"] for st in synthetic["stages"]]
    assert all(h is not None and h > 0.5 for h in hit), hit
    assert all(m is not None and m < 0.2 for m in miss), miss
    print(f"engine prefix cache hit rate: replay {hit} vs --input-len fixed:{mean} {miss}")
