"""Conversations (``--turns``) and shared system prompts (``--shared-prefix-len``) without a server: the turn
sequence, the history each turn carries, the client's prompt count against the chat template rendered whole,
``--max-model-len``, the answer text kept from a stream, and the options' refusals."""

from __future__ import annotations

import argparse
from types import SimpleNamespace

import orjson
import pytest

from run.context import attach
from shapes.stage import MAIN
from users.adapters import adapter_named
from users.conversation import Conversation, TranscriptTally
from users.options import ThinkTime, think_time, turns_spec
from users.request import draw
from users.settings import RunSettings
from workload.tokenizers import chat_renderer

CHAT = adapter_named("chat")


def _settings(**over) -> RunSettings:
    opts = {"input_len": "fixed:100", "output_len": "fixed:10", "tokenizer": "deepseek-v2", "turns": "fixed:3",
            "shared_prefix_len": 64, "prefix_groups": 2, "seed": 7, **over}
    return RunSettings.from_options(SimpleNamespace(**opts))


def _answer(conv: Conversation, text: str) -> None:
    """Feed the conversation's tally a stream answering ``text`` (two content chunks, then usage)."""
    tally = conv.answer.tally(0)
    half = len(text) // 2
    events = [{"choices": [{"index": 0, "delta": {"content": part}, "finish_reason": None}]}
              for part in (text[:half], text[half:])]
    tally.add([orjson.dumps(e) for e in events] + [b"[DONE]"], 1.0)


def _rendered_tokens(settings: RunSettings, messages: list[dict]) -> int:
    render = chat_renderer(settings.tokenizer_name)  # the tokenizer's own template, as vLLM renders it
    return len(settings.tokenizer.encode(render(messages), add_special_tokens=False).ids)


def test_turns_carry_the_history_and_count_it_as_the_template_renders_it():
    s = _settings()
    conv = Conversation(s, group=1)
    seen = []
    for _ in range(4):
        inp = conv.draw(CHAT, MAIN)
        seen.append(inp.meta.turn)
        # the client's count equals the whole conversation rendered by the chat template and encoded
        assert inp.prompt_tokens == _rendered_tokens(s, inp.model_input)
        assert inp.model_input[0] == {"role": "system", "content": s.system_prompt(1)}
        assert [m["role"] for m in inp.model_input[1:]] == ["user", "assistant"] * (inp.meta.turn - 1) + ["user"]
        _answer(conv, " The answer is forty two, said the model")
        assert conv.after(True) == 0.0  # --think-time's default
    assert seen == [1, 2, 3, 1]


def test_system_prompt_is_exact_shared_per_group_and_the_same_in_every_process():
    a, b = _settings(), _settings()
    b.worker_index = 3
    assert a.system_prompt(0) == b.system_prompt(0) != a.system_prompt(1)
    assert len(a.tokenizer.encode(a.system_prompt(0), add_special_tokens=False).ids) == 64
    inp = draw(a, CHAT, MAIN, group=0)
    assert inp.model_input[0] == {"role": "system", "content": a.system_prompt(0)}
    # 100 + 64 words + what deepseek-v2's own template puts after a system prompt ("\n\n")
    assert inp.prompt_tokens == _rendered_tokens(a, inp.model_input) == 166
    comp = draw(a, adapter_named("completions"), MAIN, group=1)
    assert comp.texts[0].startswith(a.system_prompt(1))
    assert [a.next_group() for _ in range(3)] == [0, 1, 0]
    assert [b.next_group() for _ in range(2)] == [1, 0]  # worker 3 starts at group 3 % 2


def test_max_model_len_and_a_failed_turn_end_the_conversation():
    s = _settings(turns="fixed:10", max_model_len=370)
    conv = Conversation(s)
    turns = []
    for _ in range(5):
        inp = conv.draw(CHAT, MAIN)
        assert inp.prompt_tokens + inp.max_tokens <= 370
        turns.append(inp.meta.turn)
        _answer(conv, " short answer")
        conv.after(True)
    assert turns == [1, 2, 1, 2, 1]  # 164, then 164 + 2 answer tokens + 100 = 266; a third would be 368 + 10 > 370
    conv.draw(CHAT, MAIN)
    assert conv.after(False) == 0.0
    assert conv.draw(CHAT, MAIN).meta.turn == 1


def test_think_time_between_turns_only():
    s = _settings(turns="fixed:2", think_time="uniform:1:2")
    conv = Conversation(s)
    conv.draw(CHAT, MAIN)
    _answer(conv, " a")
    assert 1.0 <= conv.after(True) <= 2.0
    conv.draw(CHAT, MAIN)
    _answer(conv, " b")
    assert conv.after(True) == 0.0


def test_transcript_tally_keeps_content_and_counts_like_the_plain_one():
    t = TranscriptTally(10)
    chunk = {"choices": [{"index": 0, "delta": {"content": " hi"}, "finish_reason": None}],
             "usage": {"prompt_tokens": 10, "completion_tokens": 1}}
    t.add([orjson.dumps(chunk), b"[DONE]"], 2.0)
    assert t.answer == [" hi"] and t.output_tokens == 1 and t.chunk_times == [2.0] and t.done


@pytest.mark.parametrize("text, value", [("2", "fixed:2"), ("fixed:0.5", "fixed:0.5"), ("uniform:1:3", "uniform:1:3")])
def test_think_time_forms(text, value):
    assert think_time(text) == value == str(ThinkTime.parse(value))


@pytest.mark.parametrize("text", ["uniform:3:1", "fixed:-1", "normal:1:2", "soon", "uniform:1"])
def test_think_time_refusals_name_the_forms(text):
    with pytest.raises(argparse.ArgumentTypeError, match="expected fixed:S or uniform:LO:HI"):
        think_time(text)


def test_turns_spec():
    assert turns_spec("") == ""
    assert turns_spec("4") == "fixed:4"
    with pytest.raises(argparse.ArgumentTypeError, match="expected one of"):
        turns_spec("many")


def test_turns_on_a_completions_user_is_said_once(caplog):
    from locust.env import Environment

    from users.base import StreamingChatUser, StreamingCompletionUser

    class Completer(StreamingCompletionUser):
        host = "http://127.0.0.1:9"

    class Chatter(StreamingChatUser):
        host = "http://127.0.0.1:9"

    env = Environment()
    attach(env).settings = _settings()
    with caplog.at_level("WARNING", logger="users.base"):
        comp = [Completer(env) for _ in range(2)]
        chat = Chatter(env)
    assert [r.getMessage() for r in caplog.records] == [
        "--turns applies to chat users only: Completer sends single requests"]
    assert all(u._conv is None for u in comp) and chat._conv is not None
