"""The real vLLM CPU engine speculating (ngram prompt lookup, 3 drafts; tests/vllm/engine.py SPEC_FLAGS) at
temperature 0, where the tiny model loops and drafts are accepted: the in-band records of the request log add up
to the engine's own counters exactly, the summary's acceptance is theirs, and the tail composition comes from the
in-band records with no collector."""

from __future__ import annotations

import json
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.vllm.conftest import SHARED_KV
from tests.vllm.engine import SPEC_FLAGS
from tests.vllm.locust_run import run_local

pytestmark = [pytest.mark.vllm, pytest.mark.slow]


NAMES = {"drafts": "vllm:spec_decode_num_drafts_total", "draft_tokens": "vllm:spec_decode_num_draft_tokens_total",
         "accepted": "vllm:spec_decode_num_accepted_tokens_total"}


def _spec(url: str) -> dict:
    """The engine's speculative counters (summed over engines), read here with prometheus_client alone."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as r:
        text = r.read().decode()
    samples = [s for fam in text_string_to_metric_families(text) for s in fam.samples]
    return {f: sum(s.value for s in samples if s.name == name) for f, name in NAMES.items()}


@pytest.fixture
def vllm_spec(engine_pool):
    """The tiny model speculating: a server of its own, started once, after the shared one (this module runs last)."""
    return engine_pool.serve(SHARED_KV, SPEC_FLAGS)


def test_in_band_records_add_up_to_the_engines_counters(vllm_spec, tmp_path):
    vllm_server = vllm_spec
    log = tmp_path / "requests.jsonl"
    before = _spec(vllm_server.url)
    run = run_local(vllm_server.url, tmp_path, "StreamingChatUser", users=2, seconds=8,
                    extra=["--input-len", "fixed:64", "--output-len", "fixed:96", "--temperature", "0",
                           "--llm-requests-jsonl", str(log)])
    after = _spec(vllm_server.url)
    delta = {f: after[f] - before[f] for f in after}
    lines = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    s = run.summary
    spec = s["speculative"]
    print(f"\nvLLM ngram at temperature 0: {len(lines)} requests, counters {delta}, "
          f"summary {json.dumps({k: spec[k] for k in ('source', 'acceptance_rate', 'mean_acceptance_length')})}")
    assert lines and all(ln["ok"] for ln in lines) and delta["draft_tokens"] > 0, run.output[-3000:]
    assert sum(ln["spec_accepted"] or 0 for ln in lines) == delta["accepted"]
    assert sum(ln["spec_drafted"] or 0 for ln in lines) == delta["draft_tokens"]
    assert sum(ln["spec_steps"] or 0 for ln in lines) == delta["drafts"]
    assert spec["source"] == "server_counters"
    assert spec["acceptance_rate"] == pytest.approx(delta["accepted"] / delta["draft_tokens"], rel=1e-9)
    assert spec["in_band"]["accepted_tokens"] == delta["accepted"] and spec["temperature"] == 0.0
    assert spec["warning"] and "--prompt-file" in spec["warning"]  # synthetic prompts
    assert len(spec["acceptance_per_position"]) == 3
    for ln in lines:
        assert ln["server_ttft_ms"] is not None and ln["server_ttft_ms"] <= ln["ttft_ms"], ln
        assert ln["token_source"] == "usage" and sum(ln["chunk_tokens"]) == ln["output_tokens"], ln
        assert ln["cached_tokens"] is not None
    assert max(k for ln in lines for k in ln["chunk_tokens"]) > 1  # accepted drafts arrive as multi-token chunks
    t = s["traces"]  # no --otlp-receiver: the join is the in-band records'
    assert t["source"] == "in_band" and t["joined"] == s["requests"]["ok"] and t["receiving"] is False
    assert t["tail"]["ttft"]["requests"] >= 1 and t["server_ttft_over_client"] == 0
    print(f"  tail (in-band): {t['tail']['ttft']['statement']}")
