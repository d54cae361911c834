"""Chunk classification (the README's definitions): role-only and empty chunks bear no token, k from the usage delta."""

from __future__ import annotations

import json

import pytest

from tests.fixtures.sse import load_transcript, names
from users.sse import SSEParser
from users.tally import StreamFault, StreamTally


def chat(content: str | None = None, ct: int | None = None, finish: str | None = None, role: bool = False) -> bytes:
    delta: dict = {"role": "assistant", "content": ""} if role else {}
    if content is not None:
        delta["content"] = content
    obj: dict = {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    if ct is not None:
        obj["usage"] = {"prompt_tokens": 9, "completion_tokens": ct, "total_tokens": 9 + ct}
    return json.dumps(obj).encode()


def usage_only(ct: int, pt: int = 9) -> bytes:
    return json.dumps({"choices": [], "usage": {"prompt_tokens": pt, "completion_tokens": ct}}).encode()


def test_continuous_usage_gives_k_from_the_delta_and_skips_role_chunk() -> None:
    t = StreamTally(5)
    t.add([chat(role=True, ct=0)], 1.0)
    t.add([chat(" a b c", ct=3)], 2.0)
    t.add([chat("", ct=4)], 3.0)  # empty text, but a token (partial UTF-8): usage rose
    t.add([chat(" d", ct=4)], 3.5)  # text but usage did not rise: no token
    t.add([chat(" e", ct=6, finish="length"), usage_only(6), b"[DONE]"], 4.0)
    assert t.chunk_times == [2.0, 3.0, 4.0]
    assert t.chunk_tokens == [3, 1, 2]
    assert t.output_tokens == 6 and t.usage_tokens == 6 and t.prompt_tokens == 9
    assert t.done and t.finished and t.continuous
    assert t.client_prompt_tokens == 5


def test_without_usage_each_non_empty_text_chunk_is_one_token() -> None:
    t = StreamTally()
    t.add([chat(role=True)], 1.0)
    t.add([chat("")], 1.5)
    t.add([chat(" x")], 2.0)
    reasoning = {"choices": [{"delta": {"reasoning_content": "think"}, "finish_reason": None}]}
    t.add([json.dumps(reasoning).encode()], 2.5)
    completion = {"choices": [{"index": 0, "text": " y", "finish_reason": "stop"}]}
    t.add([json.dumps(completion).encode(), usage_only(7)], 3.0)
    assert t.chunk_times == [2.0, 2.5, 3.0] and t.chunk_tokens == [1, 1, 1]
    assert t.texts == [" x", "think", " y"]
    assert t.usage_tokens == 7 and not t.continuous  # final usage gives the count, not a token chunk
    assert t.finished and not t.done


@pytest.mark.parametrize(
    ("payload", "kind"),
    [
        (b'{"choices": [{"delta": {"content": "oops', "bad_chunk"),
        (b"hello", "bad_chunk"),
        (b'{"id": 1}', "bad_chunk"),
        (b'{"error": {"message": "CUDA out of memory", "code": 500}}', "server_error"),
        (b'{"object": "error", "message": "boom", "code": 400}', "server_error"),
    ],
)
def test_faults_inside_the_stream(payload: bytes, kind: str) -> None:
    t = StreamTally()
    with pytest.raises(StreamFault) as e:
        t.add([chat(" ok", ct=1), payload], 1.0)
    assert e.value.kind == kind
    assert str(e.value).startswith(f"{kind}: ")
    assert t.chunk_tokens == [1]  # what came before the fault is kept


def test_blank_payload_is_ignored() -> None:
    t = StreamTally()
    t.add([b"", b"  "], 1.0)
    assert t.chunk_times == []


@pytest.mark.parametrize("name", [n for n in names() if load_transcript(n).ok])
def test_recorded_vllm_streams(name: str) -> None:
    """Against the real engine's bytes: usage-derived counts agree with the server's final usage."""
    rec = load_transcript(name)
    t = StreamTally()
    parser = SSEParser()
    for i in range(0, len(rec.body), 50):
        t.add(parser.feed(rec.body[i : i + 50]), float(i))
    assert t.done and t.finished
    usage = rec.usage
    if usage is None:  # no usage at all: one token per non-empty text chunk, texts kept for the tokenizer
        assert t.usage_tokens is None and set(t.chunk_tokens) == {1} and len(t.texts) == len(t.chunk_tokens) > 0
        return
    assert t.usage_tokens == usage["completion_tokens"]
    if rec.meta["request"].get("stream_options", {}).get("continuous_usage_stats"):
        assert sum(t.chunk_tokens) == usage["completion_tokens"]
        assert all(k >= 1 for k in t.chunk_tokens)
    else:
        assert 1 <= sum(t.chunk_tokens) <= usage["completion_tokens"]
    if rec.is_chat:  # the role-only first chunk never counts: the first token chunk has text or a usage rise
        first = json.loads(rec.payloads[0])
        assert first["choices"][0]["delta"].get("role") == "assistant"
