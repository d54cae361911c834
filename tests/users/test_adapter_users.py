"""The user classes in process, each against a local server that records what it was sent: the adapter a
class names decides the path, the body and how the answer is read. A toy endpoint, registered here, shows
that a new endpoint needs only an adapter and its registration."""

from __future__ import annotations

import argparse
import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from locust.env import Environment

from tests.fixtures.sse import load_transcript
from users import BatchCompletionUser, LLMUser, StreamingChatUser, StreamingCompletionUser
from users.adapters import ADAPTERS, register
from users.adapters.base import Adapter
from users.adapters.openai import OpenAIAnswer
from users.request import RequestInput
from users.tally import StreamTally

Answer = Callable[[str, dict], tuple[int, str, bytes]]
SSE = "text/event-stream"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.seen.append((self.path, dict(self.headers), body))  # type: ignore[attr-defined]
        status, ctype, payload = self.server.answer(self.path, body)  # type: ignore[attr-defined]
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *_args) -> None:
        pass


@contextmanager
def recording(answer: Answer) -> Iterator[tuple[str, list]]:
    """A local HTTP server answering every POST with ``answer(path, body)``; yields (host, what it saw)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.seen, server.answer = [], answer  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", server.seen  # type: ignore[attr-defined]
    finally:
        server.shutdown()
        server.server_close()


def send_once(user_class: type[LLMUser], host: str, **options):
    """Build ``user_class`` on a fresh Environment and send one request: (result, the request events)."""
    opts = argparse.Namespace(**{"input_len": "16", "output_len": "8", "seed": 0, "model": "m", **options})
    env = Environment(user_classes=[user_class], host=host, parsed_options=opts)
    events: list[dict] = []
    env.events.request.add_listener(lambda **kw: events.append(kw))
    hosted = type(user_class.__name__, (user_class,), {"host": host})  # what Locust's runner sets from --host
    user = hosted(env)
    try:
        return user.send(), events
    finally:
        user.client.client.close()


def transcript(name: str) -> Answer:
    body = load_transcript(name).body
    return lambda path, req: (200, SSE, body)


def test_streaming_chat_user_sends_its_adapters_body_and_reads_the_stream() -> None:
    t = load_transcript("chat_continuous")
    with recording(transcript("chat_continuous")) as (host, seen):
        r, events = send_once(StreamingChatUser, host)
    [(path, headers, body)] = seen
    assert path == "/v1/chat/completions" and headers["Accept"] == SSE
    assert body["messages"][0]["role"] == "user" and body["stream"] is True
    assert body["stream_options"] == {"include_usage": True, "continuous_usage_stats": True}
    assert (body["max_tokens"], body["min_tokens"], body["ignore_eos"], body["model"]) == (8, 8, True, "m")
    assert r.ok, r.error_message
    assert (r.output_tokens, r.prompt_tokens) == (t.usage["completion_tokens"], t.usage["prompt_tokens"])
    assert (r.prompt_tokens_client, r.meta.max_tokens, r.meta.batch_size, r.meta.version) == (16, 8, 1, None)
    m = r.meta
    assert (m.name, m.user_class, m.stage) == ("POST /v1/chat/completions [stream]", "StreamingChatUser", "main")
    [e] = events
    assert (e["request_type"], e["name"], e["url"], e["exception"]) == ("LLM", r.meta.name, path, None)
    assert e["response_length"] == r.output_tokens and e["context"]["llm_result"] is r
    assert e["response_time"] == pytest.approx(r.e2e_s * 1000.0)
    assert r.prompt_build_s is not None and r.prompt_build_s > 0.0  # the tokenizer layer: the call's build time


def test_streaming_completion_user_sends_a_raw_prompt() -> None:
    t = load_transcript("completions_continuous")
    with recording(transcript("completions_continuous")) as (host, seen):
        r, _ = send_once(StreamingCompletionUser, host)
    [(path, _headers, body)] = seen
    assert path == "/v1/completions" and isinstance(body["prompt"], str) and body["stream"] is True
    assert r.ok and r.output_tokens == t.usage["completion_tokens"] == sum(r.chunk_tokens)
    assert r.meta.name == "POST /v1/completions [stream]" and r.token_source == "usage"


def test_batch_completion_user_sends_batch_size_prompts_and_reads_the_whole_answer() -> None:
    whole = {"choices": [{"text": "a"}, {"text": "b"}], "usage": {"prompt_tokens": 40, "completion_tokens": 16}}
    with recording(lambda path, req: (200, "application/json", json.dumps(whole).encode())) as (host, seen):
        r, events = send_once(BatchCompletionUser, host, batch_size=2)
    [(path, headers, body)] = seen
    assert path == "/v1/completions" and headers["Accept"] == "application/json"
    assert body["stream"] is False and "stream_options" not in body
    assert isinstance(body["prompt"], list) and len(body["prompt"]) == 2
    assert r.ok and (r.output_tokens, r.prompt_tokens, r.prompt_tokens_client, r.meta.batch_size) == (16, 40, 32, 2)
    assert r.meta.name == events[0]["name"] == "POST /v1/completions [batch]" and len(r.chunk_times) == 0


def test_a_routed_request_goes_under_the_routes_base_path_with_its_metadata_headers() -> None:
    with recording(transcript("completions_continuous")) as (host, seen):
        r, events = send_once(StreamingCompletionUser, "http://127.0.0.1:9", route_table=f"v1={host}/base@0-99")
    [(path, headers, _body)] = seen
    assert path == "/base/v1/completions"
    assert headers["X-Tokenizer-Version"] == "v1" and len(headers["X-Tokenizer-Hash"]) == 64
    assert r.ok and r.meta.version == "v1" and events[0]["url"] == "/v1/completions"


# --- a new endpoint: one adapter + one registration ----------------------------------------------


class ToyAnswer(OpenAIAnswer):
    """The toy endpoint streams OpenAI-shaped chunks but never sends a finish_reason: [DONE] alone ends it."""

    def stream_missing(self, tally: StreamTally) -> tuple[str, ...]:
        return () if tally.done else ("[DONE]",)


class ToyAdapter(Adapter):
    name = "toy"
    path = "/v1/toy"
    answer = ToyAnswer()

    def model_input(self, texts: tuple[str, ...]) -> dict:
        return {"text": texts[0]}

    def body(self, inp: RequestInput) -> dict:
        return {"input": inp.model_input, "limit": inp.max_tokens, "stream": True}


class ToyUser(LLMUser):
    adapter = "toy"


TOY_STREAM = (
    b"".join(
        b'data: {"choices":[{"index":0,"text":"%s","finish_reason":null}]}\n\n' % w
        for w in (b" one", b" two", b" three")
    )
    + b"data: [DONE]\n\n"
)


@pytest.fixture
def toy() -> Iterator[ToyAdapter]:
    adapter = register(ToyAdapter())
    try:
        yield adapter
    finally:
        ADAPTERS.pop("toy")


def test_a_registered_toy_adapter_is_all_a_new_endpoint_needs(toy: ToyAdapter) -> None:
    with recording(lambda path, req: (200, SSE, TOY_STREAM)) as (host, seen):
        r, events = send_once(ToyUser, host)
    [(path, _headers, body)] = seen
    assert path == "/v1/toy"
    assert set(body) == {"input", "limit", "stream"} and body["limit"] == 8 and isinstance(body["input"]["text"], str)
    assert r.ok, r.error_message
    assert r.meta.name == events[0]["name"] == "POST /v1/toy [stream]" and r.meta.user_class == "ToyUser"
    assert list(r.chunk_tokens) == [1, 1, 1] and r.token_source == "tokenizer" and r.output_tokens >= 3


def test_the_end_of_stream_rule_is_the_adapters(toy: ToyAdapter) -> None:
    """The same bytes fail on the chat endpoint, whose OpenAI rule also wants a finish_reason."""
    with recording(lambda path, req: (200, SSE, TOY_STREAM)) as (host, _seen):
        r, events = send_once(StreamingChatUser, host)
    assert not r.ok and r.error_kind == "stream_cut"
    assert r.error_message == "stream_cut: stream ended without finish_reason after 3 tokens"
    assert str(events[0]["exception"]) == r.error_message
