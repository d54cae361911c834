"""The server's in-band record read from the last usage chunk of a stream and from a whole answer: vLLM 0.32's
``metrics`` object, its ``speculative_decoding`` part and ``usage.prompt_tokens_details.cached_tokens``."""

from __future__ import annotations

import orjson
import pytest

from users.adapters.openai import OPENAI
from users.inband import server_record
from users.tally import StreamTally

SPEC = {"mean_acceptance_length": 3.5625, "draft_acceptance_rate": 0.976, "acceptance_histogram": [1, 2, 0, 13],
        "num_spec_steps": 16, "num_accepted_draft_tokens": 41, "num_draft_tokens": 42, "num_spec_tokens": 3}
METRICS = {"time_to_first_token_ms": 12.5, "generation_time_ms": 300.0, "queue_time_ms": 2.0, "mean_itl_ms": 7.5,
           "tokens_per_second": 133.3, "speculative_decoding": SPEC}
USAGE = {"prompt_tokens": 20, "completion_tokens": 57, "total_tokens": 77,
         "prompt_tokens_details": {"cached_tokens": 16, "created_cache_tokens": 0}}


def test_the_last_usage_chunk_carries_the_record():
    t = StreamTally()
    chunk = {"choices": [{"index": 0, "delta": {"content": "ab"}, "finish_reason": "length"}],
             "usage": {"prompt_tokens": 20, "completion_tokens": 57}}
    last = {"choices": [], "usage": USAGE, "metrics": METRICS}
    t.add([orjson.dumps(chunk), orjson.dumps(last), b"[DONE]"], 1.0)
    rec = server_record(t.final)
    assert (rec.ttft_s, rec.queue_s, rec.generation_s, rec.mean_itl_s) == pytest.approx((0.0125, 0.002, 0.3, 0.0075))
    assert (rec.cached_tokens, rec.spec_steps, rec.spec_drafted, rec.spec_accepted) == (16, 16, 42, 41)
    # histogram [1, 2, 0, 13]: position 0 accepted in 2 + 0 + 13 steps, position 1 in 13, position 2 in 13
    assert rec.spec_accepted_per_position == (15, 13, 13)
    assert sum(rec.spec_accepted_per_position) == rec.spec_accepted
    assert rec.server_e2e_s == pytest.approx(0.3145)


def test_a_whole_answer_carries_it_too():
    body = {"choices": [{"index": 0, "text": "x", "finish_reason": "length"}], "usage": USAGE,
            "metrics": {**METRICS, "speculative_decoding": None}}
    w = OPENAI.parse_whole(orjson.dumps(body), None)
    assert w.output_tokens == 57 and w.server.ttft_s == pytest.approx(0.0125)
    assert (w.server.spec_drafted, w.server.spec_accepted_per_position, w.server.cached_tokens) == (None, (), 16)


@pytest.mark.parametrize("obj", [
    {"choices": [], "usage": {"completion_tokens": 3}},
    {"choices": [], "usage": {"completion_tokens": 3, "prompt_tokens_details": None}, "metrics": None},
    None,
])
def test_an_answer_without_a_record_has_none(obj):
    assert server_record(obj) is None


def test_values_of_the_wrong_kind_are_left_out_not_raised():
    rec = server_record({"metrics": {"time_to_first_token_ms": "fast", "queue_time_ms": -1, "generation_time_ms": True,
                                     "speculative_decoding": {"num_draft_tokens": 2.5, "acceptance_histogram": "x"}},
                         "usage": {"prompt_tokens_details": {"cached_tokens": "7"}}})
    assert (rec.ttft_s, rec.queue_s, rec.generation_s, rec.spec_drafted, rec.cached_tokens) == (None,) * 5
    assert rec.spec_accepted_per_position == ()
