"""Contract suite: SSE bodies recorded from the real vLLM CPU engine, replayed through the users' code.

The transcripts (``tests/fixtures/sse``, recorded by ``scripts/capture_transcripts.py``) hold what
vLLM 0.32 really sends: the role-only first chat chunk, ``content: ""`` chunks (special tokens,
partial UTF-8), the ``choices: []`` usage chunk, usage on every chunk under ``continuous_usage_stats``,
interleaved choices of a two-prompt request, and JSON error bodies (404, 400).

Two replays, both fast (no engine needed):
1. pure: the body cut into random 1..7-byte reads -> ``users.sse.SSEParser`` -> ``users.tally.StreamTally``;
2. wire: a local socket server writes the body (chunked transfer encoding, events cut mid-way, UTF-8
   split) and ``users.client.exchange`` turns it into a ``GenerationResult``.
Expected values come from the transcript itself (its usage object) and from the reference
classifier below, written from the README's definition of a token-bearing chunk.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.contract.replay import ReplayServer, cut, exchange_transcript  # noqa: F401
from tests.fixtures.sse import Transcript, load_transcript, names
from users.sse import SSEParser
from users.tally import StreamTally
from workload.tokenizers import load_tokenizer

STREAMS = [n for n in names() if load_transcript(n).ok]
ERRORS = [n for n in names() if not load_transcript(n).ok]


def test_the_recorded_set_covers_the_contract():
    """Guard against a re-recording that silently drops a case the suite relies on."""
    kinds = {n: load_transcript(n) for n in names()}
    assert any(t.is_chat and "continuous_usage_stats" in json.dumps(t.meta["request"]) for t in kinds.values())
    assert any(not t.is_chat and t.ok for t in kinds.values())
    assert any(t.ok and t.usage is None for t in kinds.values())
    assert {t.meta["status"] for t in kinds.values()} >= {200, 400, 404}


# --- reference classifier (the README's "token-bearing chunk"), independent of users/ -----------------


def reference_tokens(t: Transcript) -> list[int]:
    """k for each payload (0 = bears no token), from the definition, not from users/."""
    out, last_ct = [], 0
    for p in t.payloads:
        if p == b"[DONE]":
            out.append(0)
            continue
        obj = json.loads(p)
        choices, usage = obj.get("choices") or [], obj.get("usage")
        if choices and usage and usage.get("completion_tokens") is not None:
            out.append(usage["completion_tokens"] - last_ct)
            last_ct = usage["completion_tokens"]
            continue
        if usage and usage.get("completion_tokens") is not None:
            last_ct = usage["completion_tokens"]
        k = 0
        for c in choices[:1]:
            delta = c.get("delta")
            text = (
                next((delta[f] for f in ("content", "reasoning_content", "reasoning") if delta.get(f)), "")
                if delta is not None
                else c.get("text") or ""
            )
            k = 1 if text else 0
        out.append(k)
    return out


def replay(pieces: list[bytes]) -> tuple[list[bytes], StreamTally]:
    """Feed the reads in order; read i arrives at time i."""
    parser, tally, got = SSEParser(), StreamTally(), []
    for i, piece in enumerate(pieces):
        events = parser.feed(piece)
        got += events
        tally.add(events, float(i))
    tail = parser.close()
    got += tail
    tally.add(tail, float(len(pieces)))
    return got, tally


def completion_times(body: bytes, pieces: list[bytes]) -> list[float]:
    """For each event, the index of the read that delivered its terminating blank line."""
    ends, pos = [], 0
    while (j := body.find(b"\n\n", pos)) >= 0:
        ends.append(j + 1)  # index of the second \n
        pos = j + 2
    bounds = np.cumsum([len(p) for p in pieces])
    return [float(np.searchsorted(bounds, e, side="right")) for e in ends]


# --- 1. pure replay ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", STREAMS)
@pytest.mark.parametrize("seed", range(5))
def test_random_read_splits_give_the_recorded_events_and_tokens(name: str, seed: int):
    t = load_transcript(name)
    pieces = cut(t.body, np.random.default_rng(seed))
    got, tally = replay(pieces)
    assert got == t.payloads  # framing survives any split, multi-byte UTF-8 included
    assert tally.done and tally.finished

    ks = reference_tokens(t)
    when = completion_times(t.body, pieces)
    assert tally.chunk_tokens == [k for k in ks if k > 0]
    assert tally.chunk_times == [w for w, k in zip(when, ks, strict=True) if k > 0]
    if t.usage is not None:
        assert tally.prompt_tokens == t.usage["prompt_tokens"]
        assert tally.usage_tokens == t.usage["completion_tokens"] == t.meta["request"]["max_tokens"] * _prompts(t)
    else:
        assert tally.usage_tokens is None and tally.prompt_tokens is None


@pytest.mark.parametrize("name", [n for n in STREAMS if "continuous" in n])
def test_continuous_usage_counts_every_token_in_chunks(name: str):
    """With usage on every chunk the chunk tokens add up to the server's total exactly
    (empty-content chunks included: their usage still rose)."""
    t = load_transcript(name)
    _, tally = replay([t.body])
    assert tally.continuous
    assert sum(tally.chunk_tokens) == tally.output_tokens == t.usage["completion_tokens"]


@pytest.mark.parametrize("name", [n for n in STREAMS if "continuous" not in n and "batch" not in n])
def test_without_continuous_usage_empty_chunks_bear_no_token(name: str):
    """vLLM sends some ``content: ""`` chunks; counted by text they bear nothing, so the chunk count
    falls short of the usage total — which is why the result takes output tokens from usage."""
    t = load_transcript(name)
    contents = [_text(p) for p in t.payloads if p != b"[DONE]" and json.loads(p).get("choices")]
    _, tally = replay([t.body])
    assert tally.output_tokens == sum(1 for c in contents if c)
    assert tally.output_tokens < t.meta["request"]["max_tokens"]  # the recording holds at least one empty chunk


@pytest.mark.parametrize("name", [n for n in STREAMS if load_transcript(n).is_chat])
def test_role_chunk_bears_no_token(name: str):
    t = load_transcript(name)
    first = json.loads(t.payloads[0])
    assert first["choices"][0]["delta"].get("role") == "assistant"
    tally = StreamTally()
    tally.add(t.payloads[:1], 0.0)
    assert tally.output_tokens == 0 and tally.chunk_times == []
    tally.add(t.payloads[1:2], 1.0)
    assert tally.chunk_times == [1.0]


@pytest.mark.parametrize("name", ERRORS)
def test_error_bodies_are_not_events(name: str):
    """A 4xx body is plain JSON; fed to the framer it yields no event (the client reads the status first)."""
    t = load_transcript(name)
    parser = SSEParser()
    assert parser.feed(t.body) == [] and parser.close() == []
    assert json.loads(t.body)["error"]["code"] == t.meta["status"]


# --- 2. wire replay through the real client ------------------------------------------------------


@pytest.mark.parametrize("name", [n for n in STREAMS if load_transcript(n).usage is not None])
def test_client_result_from_recorded_stream(name: str):
    t = load_transcript(name)
    r = exchange_transcript(t)
    assert r.ok, r.error_message
    assert r.token_source == "usage"
    assert r.output_tokens == t.usage["completion_tokens"]
    assert r.prompt_tokens == t.usage["prompt_tokens"]
    assert list(r.chunk_tokens) == [k for k in reference_tokens(t) if k > 0]
    assert np.all(np.diff(r.chunk_times) >= 0)
    assert r.t0 <= r.chunk_times[0] and r.ttft_s < r.e2e_s


def test_client_counts_with_the_tokenizer_when_no_usage_is_sent():
    t = load_transcript("chat_no_usage")
    tok = load_tokenizer()
    r = exchange_transcript(t, count_text=lambda s: len(tok.encode(s, add_special_tokens=False).ids))
    assert r.ok, r.error_message
    assert r.token_source == "tokenizer"
    text = "".join(_text(p) for p in t.payloads if p != b"[DONE]")
    assert r.output_tokens == len(tok.encode(text, add_special_tokens=False).ids) > 0


@pytest.mark.parametrize("name", ERRORS)
def test_client_reports_recorded_errors_as_4xx_with_the_server_message(name: str):
    t = load_transcript(name)
    r = exchange_transcript(t)
    assert not r.ok
    assert r.error_kind == "http_4xx"
    assert str(t.meta["status"]) in r.error_message
    assert json.loads(t.body)["error"]["message"][:60] in r.error_message


def _prompts(t: Transcript) -> int:
    prompt = t.meta["request"].get("prompt")
    return len(prompt) if isinstance(prompt, list) else 1


def _text(p: bytes) -> str:
    choices = json.loads(p).get("choices") or []
    if not choices:
        return ""
    c = choices[0]
    return (c.get("delta") or {}).get("content") or "" if "delta" in c else c.get("text") or ""
