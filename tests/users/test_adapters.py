"""The API adapter registry and the request input: each adapter's path, body, chunk classifier, end-of-stream
rule and whole-answer parse; the registry's rules; the one draw per request. No network."""

from __future__ import annotations

import argparse
import json

import gevent
import pytest

from shapes.stage import Stage
from tests.fixtures.sse import load_transcript
from users import BatchCompletionUser, StreamingChatUser, StreamingCompletionUser
from users.adapters import ADAPTERS, adapter_named, register
from users.adapters.base import Adapter, WholeAnswer
from users.adapters.chat import ChatAdapter
from users.adapters.openai import OPENAI, STREAM_OPTIONS
from users.faults import LLMError, StreamFault, quote
from users.inflight import Inflight, LiveRequest
from users.request import RequestInput, Route, draw
from users.result import RequestMeta
from users.settings import RunSettings
from users.sse import SSEParser
from users.tally import StreamTally

SAMPLING = {"max_tokens": 8, "ignore_eos": True, "min_tokens": 8, "model": "m"}


def settings(**kw) -> RunSettings:
    opts = {"input_len": "uniform:8:64", "output_len": "uniform:4:400", "seed": 3, "model": "m", **kw}
    return RunSettings.from_options(argparse.Namespace(**opts))


def request_input(adapter: Adapter, texts: tuple[str, ...]) -> RequestInput:
    return RequestInput(texts, 11, dict(SAMPLING), adapter.model_input(texts), RequestMeta(max_tokens=8))


# --- the registry --------------------------------------------------------------------------------


def test_the_public_users_name_registered_adapters() -> None:
    expect = {
        StreamingChatUser: ("chat", "/v1/chat/completions", True, True, False),
        StreamingCompletionUser: ("completions", "/v1/completions", True, False, False),
        BatchCompletionUser: ("completions-batch", "/v1/completions", False, False, True),
    }
    for user, (name, path, stream, chat, batched) in expect.items():
        a = ADAPTERS[user.adapter]
        assert (a.name, a.path, a.stream, a.chat, a.batched) == (name, path, stream, chat, batched)
        assert a.answer is OPENAI and a.answer.tally is StreamTally
    assert ADAPTERS["chat"].request_name == "POST /v1/chat/completions [stream]"
    assert ADAPTERS["completions"].request_name == "POST /v1/completions [stream]"
    assert ADAPTERS["completions-batch"].request_name == "POST /v1/completions [batch]"


def test_register_refuses_a_second_adapter_under_a_taken_name_and_names_the_known_ones() -> None:
    chat = ADAPTERS["chat"]
    assert register(chat) is chat  # the same object again: nothing changes
    with pytest.raises(ValueError, match="'chat' is already registered"):
        register(ChatAdapter())
    assert ADAPTERS["chat"] is chat

    class NoPath(ChatAdapter):
        name, path = "no-path", ""

    with pytest.raises(ValueError, match="needs a name and a path"):
        register(NoPath())
    assert "no-path" not in ADAPTERS
    with pytest.raises(ValueError, match=r"unknown API adapter 'nope'; registered: .*chat, completions"):
        adapter_named("nope")


# --- bodies --------------------------------------------------------------------------------------


def test_chat_body_is_one_user_message_streamed_with_usage_on_every_chunk() -> None:
    a = ADAPTERS["chat"]
    body = a.body(request_input(a, ("hello",)))
    assert body == {"messages": [{"role": "user", "content": "hello"}], "stream": True,
                    "stream_options": {"include_usage": True, "continuous_usage_stats": True}, **SAMPLING}
    assert list(body)[:3] == ["messages", "stream", "stream_options"]  # the request bytes keep their order
    assert STREAM_OPTIONS == {"include_usage": True, "continuous_usage_stats": True}


def test_completions_bodies_stream_one_prompt_or_batch_many() -> None:
    a = ADAPTERS["completions"]
    assert a.body(request_input(a, ("p",))) == {"prompt": "p", "stream": True, "stream_options": STREAM_OPTIONS,
                                                 **SAMPLING}
    b = ADAPTERS["completions-batch"]
    body = b.body(request_input(b, ("p", "q", "r")))
    assert body == {"prompt": ["p", "q", "r"], "stream": False, **SAMPLING}
    assert "stream_options" not in body


def test_a_body_is_a_new_dict_and_leaves_the_input_alone() -> None:
    a = ADAPTERS["completions"]
    inp = request_input(a, ("p",))
    first = a.body(inp)
    first["max_tokens"] = 1
    assert a.body(inp)["max_tokens"] == 8 and inp.sampling == SAMPLING


# --- the OpenAI answer: chunk classifier, end of stream, whole answer ----------------------------


@pytest.mark.parametrize("name", ["chat_continuous", "completions_usage", "chat_no_usage"])
def test_the_adapters_classifier_counts_a_recorded_stream(name: str) -> None:
    t = load_transcript(name)
    adapter = ADAPTERS["chat" if t.is_chat else "completions"]
    tally = adapter.answer.tally(5)
    tally.add(SSEParser().feed(t.body), 1.0)
    assert tally.client_prompt_tokens == 5 and tally.output_tokens == sum(tally.chunk_tokens) > 0
    assert adapter.answer.stream_missing(tally) == ()
    if t.usage is not None:
        assert tally.usage_tokens == t.usage["completion_tokens"] and tally.prompt_tokens == t.usage["prompt_tokens"]


def test_end_of_stream_needs_done_and_a_finish_reason() -> None:
    tally = OPENAI.tally()
    assert OPENAI.stream_missing(tally) == ("[DONE]", "finish_reason")
    tally.add([b'{"choices":[{"index":0,"text":"x","finish_reason":null}]}', b"[DONE]"], 1.0)
    assert OPENAI.stream_missing(tally) == ("finish_reason",)
    tally = OPENAI.tally()
    tally.add([b'{"choices":[{"index":0,"text":"x","finish_reason":"length"}]}'], 1.0)
    assert OPENAI.stream_missing(tally) == ("[DONE]",)
    assert tally.finish_reason == "length"
    tally.add([b"[DONE]"], 2.0)
    assert OPENAI.stream_missing(tally) == ()


def test_whole_answer_takes_usage_else_counts_the_text() -> None:
    usage = {"choices": [{"text": "a", "finish_reason": "length"}, {"text": "b", "finish_reason": "stop"}],
             "usage": {"prompt_tokens": 9, "completion_tokens": 6}}
    assert OPENAI.parse_whole(json.dumps(usage).encode(), None) == WholeAnswer(6, 9, "usage", 0, "length")
    texts = {"choices": [{"text": "ab"}, {"message": {"content": "xyz"}}, {"text": None}]}
    assert OPENAI.parse_whole(json.dumps(texts).encode(), len) == WholeAnswer(5, None, "tokenizer")
    assert OPENAI.parse_whole(json.dumps(texts).encode(), None) == WholeAnswer(0, None, "tokenizer")


@pytest.mark.parametrize(
    ("raw", "kind", "start"),
    [
        (b"  <html>bad gateway</html>\n", "bad_chunk", "bad_chunk: response is not JSON: <html>bad gateway</html>"),
        (b'{"choices": []}', "bad_chunk", 'bad_chunk: response has no choices: {"choices": []}'),
        (b"[1, 2]", "bad_chunk", "bad_chunk: response has no choices: [1, 2]"),
        (b'{"error": {"message": "boom"}}', "server_error", 'server_error: {"error": {"message": "boom"}}'),
        (b'{"object": "error", "message": "x"}', "server_error", 'server_error: {"object": "error"'),
    ],
)
def test_whole_answer_faults(raw: bytes, kind: str, start: str) -> None:
    with pytest.raises(StreamFault) as e:
        OPENAI.parse_whole(raw, None)
    assert e.value.kind == kind and str(e.value).startswith(start)


def test_faults_carry_kind_and_detail_and_quote_cuts_long_bodies() -> None:
    e = StreamFault("bad_chunk", "not JSON: x")
    assert isinstance(e, LLMError) and str(e) == repr(e) == "bad_chunk: not JSON: x" and e.detail == "not JSON: x"
    assert quote(b" a \n", strip=True) == "a" and quote(b" a \n") == " a \n"
    assert quote(b"x" * 301) == "x" * 300 + "…" and quote(b"x" * 300) == "x" * 300


# --- the request input ---------------------------------------------------------------------------


def test_draw_takes_the_output_length_then_the_prompts_from_the_stage() -> None:
    stage = Stage("len=fixed:40", input_len="fixed:40")
    s, twin = settings(), settings()
    inp = draw(s, ADAPTERS["chat"], stage)
    max_tokens = twin.max_tokens()
    p = twin.prompt(True, "fixed:40")
    assert (inp.max_tokens, inp.texts, inp.prompt_tokens) == (max_tokens, (p.text,), p.tokens)
    assert p.tokens == 40 and 4 <= max_tokens <= 400
    assert inp.sampling == twin.sampling(max_tokens) and inp.meta.stage == "len=fixed:40"
    assert inp.model_input == [{"role": "user", "content": p.text}]
    assert (inp.prompts, inp.route, inp.meta.version) == (1, None, None)


def test_draw_of_a_batch_carries_batch_size_prompts() -> None:
    s, twin = settings(batch_size=3), settings(batch_size=3)
    inp = draw(s, ADAPTERS["completions-batch"], Stage("main"))
    twin.max_tokens()
    prompts = [twin.prompt(False, None) for _ in range(3)]
    assert inp.texts == tuple(p.text for p in prompts) and inp.prompts == 3
    assert inp.prompt_tokens == sum(p.tokens for p in prompts) and inp.model_input == list(inp.texts)


def test_draw_routes_by_the_fingerprint_of_what_the_body_carries() -> None:
    table = "v1=http://127.0.0.1:8001@0-49,beta=http://127.0.0.1:8002/base@50-99"
    s = settings(route_table=table)
    seen = set()
    for _ in range(30):
        inp = draw(s, ADAPTERS["completions"], Stage("main"))
        assert isinstance(inp.route, Route) and inp.route == Route(*s.route(inp.texts[0]))
        assert inp.meta.version == inp.route.version == inp.route.headers["X-Tokenizer-Version"]
        seen.add(inp.meta.version)
    assert seen == {"v1", "beta"}


def test_request_input_is_frozen() -> None:
    inp = request_input(ADAPTERS["chat"], ("x",))
    with pytest.raises(AttributeError):
        inp.prompt_tokens = 3  # type: ignore[misc]
    with pytest.raises(AttributeError):  # the labels too: one record, shared by reference down to the result
        inp.meta.max_tokens = 3  # type: ignore[misc]


# --- liveness, apart from the tally --------------------------------------------------------------


def test_live_request_reads_progress_from_its_tally_and_is_owned_by_its_greenlet() -> None:
    tally = StreamTally(100)
    live = LiveRequest(tally, 2.5)
    assert (live.last, live.owner, live.live, live.stalled) == (2.5, gevent.getcurrent(), True, False)
    board = Inflight()
    board.add(live)
    tally.add([b'{"choices":[{"text":"a"}],"usage":{"prompt_tokens":9,"completion_tokens":3}}'], 1.0)
    assert board.snapshot() == [(100, 3)]
    assert not hasattr(tally, "last")  # the tally is pure accounting
