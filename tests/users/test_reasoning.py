"""Reasoning (DeepSeek-R1) on the client: the chunk tally's split of reasoning and answer in each wire form, the
whole (non-streamed) answer's, the result's TTFA / thinking span, and the SLO that applies only when a model reasons.
The real formats: tests/contract/test_reasoning_transcripts.py (vLLM) and tests/users/test_served_model_e2e.py."""

from __future__ import annotations

import json

import pytest

from telemetry.measure.sketch import LogSketch
from telemetry.slo import SloSet
from tests.telemetry.helpers import options
from tests.telemetry.synthetic import make_result
from users.adapters.openai import OPENAI
from users.tally import StreamTally, Think

WORDS = len  # a "tokenizer" for the tests: one token per character


def chunk(ct: int | None, **delta) -> bytes:
    obj: dict = {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
    if ct is not None:
        obj["usage"] = {"prompt_tokens": 5, "completion_tokens": ct}
    return json.dumps(obj).encode()


def feed(*events: bytes) -> StreamTally:
    t = StreamTally()
    for i, ev in enumerate(events):
        t.add([ev], float(i))
    return t


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
def test_parser_fields_split_at_the_first_content(field):
    t = feed(chunk(0, role="assistant", content=""), chunk(2, **{field: "ab"}), chunk(3, **{field: ""}),
             chunk(4, **{field: "c"}), chunk(5, content="x"), chunk(7, content="yz"))
    assert t.chunk_times == [1.0, 2.0, 3.0, 4.0, 5.0] and t.chunk_tokens == [2, 1, 1, 1, 2]
    assert (t.t_reason, t.t_answer, t.reasoning_tokens(None)) == (1.0, 4.0, 4)


def test_think_tags_in_content_split_mid_chunk():
    t = feed(chunk(1, content="<think>"), chunk(2, content="hmm"), chunk(5, content="ok</think>\n\nThe"),
             chunk(6, content=" answer"))
    assert (t.t_reason, t.t_answer) == (0.0, 2.0)
    assert t.split == (3, "\n\nThe")
    # the chunk's 3 tokens: "\n\nThe" counted 5 by the test tokenizer would exceed them: at least one is reasoning
    assert t.reasoning_tokens(lambda s: 1) == 2 + 2 and t.reasoning_tokens(WORDS) == 2 + 0


def test_think_tag_alone_ends_reasoning_and_the_next_content_is_the_answer():
    t = feed(chunk(1, content="<think>a"), chunk(2, content="</think>"), chunk(3, content="\n\n"),
             chunk(4, content="B"))
    assert (t.t_reason, t.t_answer, t.reasoning_tokens(WORDS)) == (0.0, 3.0, 3)  # the blank line is not the answer


def test_both_fields_in_one_chunk_and_tokens_before_reasoning():
    t = feed(chunk(1), chunk(3, reasoning_content="ab"), chunk(6, reasoning_content="c", content="xy"))
    assert t.pending == 1 and t.t_reason == 1.0 and t.t_answer == 2.0
    assert t.reasoning_tokens(WORDS) == 1 + 2 + (3 - 2)  # the text-less first token, "ab", the split chunk's share


def test_plain_model_answers_from_the_first_chunk_and_stops_classifying():
    t = feed(chunk(1, content="Hi"), chunk(2, content=" <think>"), chunk(3, content=" there"))
    assert (t.t_reason, t.t_answer, t.reasoning_tokens(WORDS)) == (None, 0.0, 0)


def test_without_usage_every_text_chunk_is_one_token():
    t = feed(chunk(None, reasoning_content="a"), chunk(None, reasoning_content="b"), chunk(None, content="c"))
    assert t.output_tokens == 3 and (t.t_reason, t.t_answer, t.reasoning_tokens(None)) == (0.0, 2.0, 2)


def test_open_think_never_closed_is_all_reasoning():
    t = feed(chunk(1, content="<think>"), chunk(2, content="a"), chunk(3, content="b"))
    assert (t.t_answer, t.reasoning_tokens(None)) == (None, 3)


def _whole(message: dict, usage: dict | None = None) -> bytes:
    return json.dumps({"choices": [{"index": 0, "message": message}], "usage": usage}).encode()


def _reasoning(message: dict, usage: dict | None, count) -> int:
    return OPENAI.parse_whole(_whole(message, usage), count).reasoning_tokens


def test_whole_answers():
    u = {"prompt_tokens": 4, "completion_tokens": 10}
    assert _reasoning({"content": "abc", "reasoning_content": "defgh"}, u, WORDS) == 5
    assert _reasoning({"content": None, "reasoning": "defgh"}, u, WORDS) == 10  # no answer: all of usage
    assert _reasoning({"content": "<think>ab</think>cd"}, u, WORDS) == 10  # 17 characters, capped at usage
    assert OPENAI.parse_whole(_whole({"content": "<think>ab</think>cd"}, None), WORDS)[0] == 19  # tags included
    assert _reasoning({"content": "<think>ab</think>cdefghijklmnopq"}, u, None) == 5  # by characters, 17 of 32
    assert _reasoning({"content": "plain"}, u, WORDS) == 0


def test_result_ttfa_and_thinking_span():
    r = make_result(ttft=0.1, itl=0.02, tokens=10, reasoning_chunks=4)
    assert r.ttfa_s == pytest.approx(0.1 + 4 * 0.02) and r.thinking_s == pytest.approx(4 * 0.02)
    assert (r.reasoning_tokens, r.answer_tokens) == (4, 6)
    assert r.answer_span_s == pytest.approx(5 * 0.02)  # answer chunks 5..10: five gaps after the first answer token
    assert r.answer_span_s + r.thinking_s == pytest.approx(r.decode_span_s)
    plain = make_result(ttft=0.1, itl=0.02, tokens=10)
    assert plain.ttfa_s == pytest.approx(plain.ttft_s) and plain.thinking_s is None and plain.answer_tokens == 10
    assert plain.answer_span_s == pytest.approx(plain.decode_span_s)
    assert make_result(tokens=4, reasoning_chunks=4).answer_span_s is None  # all reasoning: no answer


def test_interactive_preset_bounds_ttfa_only_when_the_model_reasons():
    slos = SloSet.from_options(options(slo_preset="interactive"))
    slow_answer = make_result(ttft=0.1, itl=0.05, tokens=40, reasoning_chunks=30)  # TTFA 1.6 s > 800 ms
    assert not slos.request_meets(slow_answer) and slos.request_meets(make_result(ttft=0.1, itl=0.05, tokens=40))
    sk = {k: LogSketch() for k in ("ttft", "ttfa", "itl", "decode_span", "thinking")}
    for k in ("ttft", "ttfa", "itl", "decode_span"):
        sk[k].add(0.1 if k != "ttfa" else 1.6)
    names = [c["name"] for c in slos.evaluate(sk, 0.0)]
    assert "ttfa_p99_ms" not in names  # no thinking span recorded: the model does not reason
    sk["thinking"].add(1.5)
    check = next(c for c in slos.evaluate(sk, 0.0) if c["name"] == "ttfa_p99_ms")
    assert not check["passed"] and check["value"] == pytest.approx(1600, rel=0.01)
    explicit = SloSet.from_options(options(slo_ttfa_p99_ms=2000.0))
    assert explicit.when_reasoning == frozenset() and explicit.request_meets(slow_answer)


def test_r1_template_opened_think_in_the_prompt():
    """R1's chat template ends the prompt with ``<think>\\n``: served without a parser, the reply starts inside the
    thinking with no opening tag (the client starts the tally inside it); with a parser, the fields say it."""
    t = StreamTally()
    t.think = Think.INSIDE
    for i, ev in enumerate([chunk(1, content="Okay"), chunk(3, content=", so</think>"), chunk(4, content="\n\n"),
                            chunk(5, content="Paris")]):
        t.add([ev], float(i))
    assert (t.t_reason, t.t_answer, t.reasoning_tokens(WORDS)) == (0.0, 3.0, 4)
    t = StreamTally()
    t.think = Think.INSIDE
    for i, ev in enumerate([chunk(1, reasoning_content="Okay"), chunk(2, content="Paris")]):
        t.add([ev], float(i))
    assert (t.t_reason, t.t_answer, t.reasoning_tokens(WORDS)) == (0.0, 1.0, 1)
    u = {"prompt_tokens": 4, "completion_tokens": 20}
    assert _reasoning({"content": "abc</think>Paris"}, u, WORDS) == len("abc</think>")  # no opening tag


def test_chosen_tokenizer_knows_whether_the_template_opens_thinking():
    from workload.tokenizers import choose_tokenizer

    assert choose_tokenizer("auto", "deepseek-ai/DeepSeek-R1").opens_thinking
    assert choose_tokenizer("auto", "deepseek-ai/DeepSeek-R1-Distill-Llama-8B").opens_thinking
    assert not choose_tokenizer("auto", "deepseek-ai/DeepSeek-V2-Lite").opens_thinking
    assert not choose_tokenizer("auto", "deepseek-ai/DeepSeek-V3").opens_thinking
