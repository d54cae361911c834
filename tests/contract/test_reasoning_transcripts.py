"""Contract: DeepSeek-R1 as vLLM serves it with ``--reasoning-parser deepseek_r1``, recorded from the real CPU
engine (``scripts/capture_transcripts.py --set reasoning``), read by the users' code and imitated by the simulator.

vLLM 0.32 puts the thinking in the delta's ``reasoning`` field (older releases: ``reasoning_content``) and says
``completion_tokens_details.reasoning_tokens: 0`` even then. The tiny random model never closes ``</think>``: the
whole answer is reasoning — still the real wire format, and the simulator with ``--reasoning`` beyond max_tokens and
``--reasoning-field reasoning`` must send the same event shapes (delta keys, finish reasons, usage counts), and be
read the same way (every token reasoning, no answer token).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from server.sim.api import REASONING_FIELDS
from tests.contract.replay import cut, exchange_transcript
from tests.fixtures.sse import load_transcript, names, whole_names
from tests.server.sim.helpers import post, running_sim, sse_events
from users.adapters.base import WholeAnswer
from users.adapters.openai import OPENAI
from users.sse import SSEParser
from users.tally import StreamTally
from workload.tokenizers import load_tokenizer

STREAMED = load_transcript("reasoning_chat_continuous")
WHOLE = load_transcript("reasoning_chat_whole")


def test_recorded_set_has_the_reasoning_cases():
    assert "reasoning_chat_continuous" in names() and "reasoning_chat_whole" in whole_names()
    assert STREAMED.meta["status"] == WHOLE.meta["status"] == 200
    deltas = [json.loads(p)["choices"][0]["delta"] for p in STREAMED.payloads[1:-2]]
    assert len(deltas) == 24 and all(set(d) == {"reasoning"} for d in deltas)  # vLLM 0.32's field
    assert sum(not d["reasoning"] for d in deltas) == 1  # a partial UTF-8 token: empty, yet a token of reasoning


def _shape(payloads: list[bytes]) -> list[tuple]:
    """What a reader depends on, per event: delta keys, finish reason, usage completion count."""
    out = []
    for p in payloads:
        if p == b"[DONE]":
            out.append(("[DONE]",))
            continue
        obj = json.loads(p)
        c = obj["choices"][0] if obj["choices"] else {}
        usage = obj.get("usage") or {}
        out.append((obj["object"], tuple(sorted(c.get("delta", {}))), c.get("finish_reason"),
                    usage.get("completion_tokens")))
    return out


def _tally(payloads_body: bytes, seed: int) -> StreamTally:
    parser, tally = SSEParser(), StreamTally()
    rng = np.random.default_rng(seed)
    for i, piece in enumerate(cut(payloads_body, rng, 1, 7)):
        events = parser.feed(bytearray(piece))
        if events:
            tally.add(events, float(i))
    tally.add(parser.close(), 1e9)
    return tally


@pytest.mark.parametrize("seed", [0, 1])
def test_recorded_reasoning_stream_is_all_reasoning(seed: int):
    t = _tally(STREAMED.body, seed)
    n = STREAMED.usage["completion_tokens"]
    assert t.output_tokens == t.usage_tokens == n == 24
    assert t.reasoning_tokens(None) == n and t.t_answer is None
    assert t.t_reason == t.chunk_times[0]


def test_client_result_from_the_recorded_reasoning_stream():
    r = exchange_transcript(STREAMED)
    assert r.ok, r.error_message
    assert r.output_tokens == r.reasoning_tokens == 24 and r.answer_tokens == 0
    assert r.t_reasoning == r.chunk_times[0] and r.ttfa_s is None and r.thinking_s is None


def test_recorded_whole_answer_is_all_reasoning():
    assert OPENAI.parse_whole(WHOLE.body, None) == WholeAnswer(24, 16, "usage", 24, "length")


@pytest.mark.slow
def test_simulator_speaks_the_recorded_reasoning_format():
    req = STREAMED.meta["request"]
    with running_sim("--time-scale", "50", "--reasoning", "fixed:1000", "--reasoning-field", "reasoning",
                     "--served-model-name", req["model"]) as sim:
        status, _h, raw = post(sim.port, STREAMED.meta["path"], req)
        w_status, _h, w_raw = post(sim.port, WHOLE.meta["path"], WHOLE.meta["request"])
    assert status == 200 and w_status == 200
    ours = sse_events(raw)
    assert _shape(ours) == _shape(STREAMED.payloads)
    t = _tally(raw, 0)
    assert t.reasoning_tokens(None) == t.output_tokens == 24 and t.t_answer is None
    msg, rec = json.loads(w_raw)["choices"][0]["message"], json.loads(WHOLE.body)["choices"][0]["message"]
    assert msg["content"] is rec["content"] is None and msg["reasoning"] and rec["reasoning"]
    assert OPENAI.parse_whole(w_raw, None) == WholeAnswer(24, json.loads(w_raw)["usage"]["prompt_tokens"], "usage", 24,
                                                    "length")


@pytest.mark.slow
@pytest.mark.parametrize("field", REASONING_FIELDS)
def test_simulator_thinking_reads_back_as_reasoning_then_answer_in_every_wire_form(field):
    """Each ``--reasoning-field`` form the simulator speaks (a parser's field, or ``<think>`` tags in the content),
    thinking 200 of 216 tokens, is read back by the users' tally as 200 reasoning tokens and then the answer — the
    per-form part of the reasoning end-to-end run (tests/users/test_served_model_e2e.py runs one form whole)."""
    model, tok = "deepseek-ai/DeepSeek-R1", load_tokenizer("deepseek-r1")
    req = {"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 216, "ignore_eos": True,
           "stream": True, "stream_options": {"include_usage": True, "continuous_usage_stats": True}}
    with running_sim("--time-scale", "50", "--served-model-name", model, "--tokenizer", "deepseek-r1",
                     "--reasoning", "fixed:200", "--reasoning-field", field) as sim:
        status, _h, raw = post(sim.port, "/v1/chat/completions", req)
    assert status == 200, raw[:300]
    t = _tally(raw, 0)
    assert t.output_tokens == 216 and t.t_reason is not None and t.t_answer is not None and t.t_reason < t.t_answer
    assert t.reasoning_tokens(lambda s: len(tok.encode(s, add_special_tokens=False).ids)) == 200
