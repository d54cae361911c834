"""Contract: speculative decoding and the per-request record as the real CPU engine sends them (ngram drafts at
temperature 0 with ``--enable-per-request-metrics --per-request-spec-decode-metrics detailed
--enable-prompt-tokens-details``; ``scripts/capture_transcripts.py --set speculative``), read by the users' code and
imitated by the simulator (``--speculative-config``, the same three flags): the last chunk's keys, the ``metrics``
and ``speculative_decoding`` objects' keys, ``usage.prompt_tokens_details``, multi-token chunks."""

from __future__ import annotations

import json

import pytest

from tests.contract.replay import exchange_transcript
from tests.fixtures.sse import load_transcript
from tests.server.sim.helpers import post, running_sim, sse_events
from users.adapters.openai import OPENAI
from users.inband import server_record

STREAMED = load_transcript("spec_chat_continuous")
WHOLE = load_transcript("spec_chat_whole")
SIM_FLAGS = ("--time-scale", "50", "--speculative-config", '{"method":"ngram","num_speculative_tokens":3}',
             "--spec-acceptance", "0.9,0.8,0.7", "--enable-per-request-metrics", "--per-request-spec-decode-metrics",
             "detailed", "--enable-prompt-tokens-details")


def _last(payloads: list[bytes]) -> dict:
    return json.loads([p for p in payloads if p != b"[DONE]"][-1])


FINGERPRINT = "system_fingerprint"
"""vLLM 0.32 stamps its last chunk with it (also without speculation); the simulator does not, and no reader uses it."""


def _keys(final: dict) -> tuple:
    """What a reader depends on: the chunk's keys, usage's, prompt_tokens_details', metrics', speculative_decoding's."""
    m = final["metrics"]
    usage = final["usage"]
    return (tuple(sorted(k for k in final if k != FINGERPRINT)), tuple(sorted(usage)),
            tuple(sorted(usage["prompt_tokens_details"])),
            tuple(sorted(m)), tuple(sorted(m["speculative_decoding"])))


def test_the_capture_uses_the_real_engine_tests_flags():
    from scripts.capture_transcripts import SPECULATIVE
    from tests.vllm.engine import SPEC_FLAGS

    assert SPECULATIVE == SPEC_FLAGS


def test_the_recorded_stream_carries_drafts_and_the_record():
    final = _last(STREAMED.payloads)
    spec = final["metrics"]["speculative_decoding"]
    assert final["choices"] == [] and spec["num_draft_tokens"] > 0 and len(spec["per_step_accepted"]) == \
        spec["num_spec_steps"] == sum(spec["acceptance_histogram"])
    r = exchange_transcript(STREAMED)
    assert r.ok and r.server is not None, r.error_message
    assert (r.server.spec_drafted, r.server.spec_accepted) == (spec["num_draft_tokens"],
                                                               spec["num_accepted_draft_tokens"])
    assert sum(r.server.spec_accepted_per_position) == r.server.spec_accepted
    assert r.output_tokens == int(r.chunk_tokens.sum()) == final["usage"]["completion_tokens"]
    assert r.chunk_tokens.max() > 1  # accepted drafts: several tokens in one chunk
    assert r.server.ttft_s * 1000 == pytest.approx(final["metrics"]["time_to_first_token_ms"])
    assert r.server.cached_tokens == final["usage"]["prompt_tokens_details"]["cached_tokens"]


def test_the_recorded_whole_answer_carries_the_record():
    w = OPENAI.parse_whole(WHOLE.body, None)
    body = json.loads(WHOLE.body)
    assert w.server is not None and w.server == server_record(body)
    assert w.server.spec_drafted == body["metrics"]["speculative_decoding"]["num_draft_tokens"]


@pytest.mark.slow
def test_the_simulator_sends_the_recorded_shapes():
    req, whole = STREAMED.meta["request"], WHOLE.meta["request"]
    with running_sim(*SIM_FLAGS, "--served-model-name", req["model"]) as sim:
        status, _h, raw = post(sim.port, STREAMED.meta["path"], req)
        w_status, _h, w_raw = post(sim.port, WHOLE.meta["path"], whole)
    assert status == w_status == 200
    assert _keys(_last(sse_events(raw))) == _keys(_last(STREAMED.payloads))
    ours, theirs = json.loads(w_raw), json.loads(WHOLE.body)
    assert _keys(ours) == _keys(theirs) or (
        tuple(sorted(ours["metrics"])) == tuple(sorted(theirs["metrics"]))
        and tuple(sorted(ours["metrics"]["speculative_decoding"])) == tuple(sorted(theirs["metrics"]
                                                                                    ["speculative_decoding"])))
    assert OPENAI.parse_whole(w_raw, None).server.spec_drafted > 0
