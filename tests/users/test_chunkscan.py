"""The byte scan of a stream's token-bearing chunks (users.chunkscan) against the full JSON decode, over generated
streams: escapes, unicode, nested quotes, multi-token chunks, role and empty chunks, both reasoning fields, numbers
that grow a digit, the final usage chunk with extra records, spaced JSON, completions' ``text``; and mutated chunks,
which the scan must refuse unless they still decode to what it read."""

from __future__ import annotations

import json
import random

import pytest

from tests.fixtures.sse import load_transcript, names
from users.chunkscan import ChunkShape
from users.faults import StreamFault
from users.sse import SSEParser
from users.tally import StreamTally, Think

ODD_TEXTS = ["", " ", "a", '"', '\\', '\\"', '"\\', '\\\\', "\n", "\t\r", "é", "姓", "первые", "\u2028", "😀", "\x00",
             '", "completion_tokens": 999, "x": "', '"},"usage":{"completion_tokens":7}}', "</think>", "<think>", "1",
             "\\u0041", "{}", "[", "data: x\n\n"]
"""Text a token may carry: escapes, quotes that close nothing, multi-byte UTF-8, JSON-looking text."""


def _text(rng: random.Random) -> str:
    if rng.random() < 0.5:
        return rng.choice(ODD_TEXTS)
    return "".join(rng.choice(ODD_TEXTS + [" the", " of", "x"]) for _ in range(rng.randint(1, 4)))


def stream(rng: random.Random, chat: bool = True) -> list[bytes]:
    """One stream's payloads as a vLLM-like server writes them (a variant drawn per stream)."""
    compact = rng.random() < 0.85
    ascii_only = rng.random() < 0.3
    dumps = (lambda o: json.dumps(o, separators=(",", ":"), ensure_ascii=ascii_only)) if compact else json.dumps
    pt = rng.choice([7, 16, 1234])
    field = rng.choice(["content", "reasoning_content", "reasoning"]) if chat else "text"
    extra_choice = rng.choice([{}, {"token_ids": None}, {"logprobs": None}])
    details = rng.choice([None, {"reasoning_tokens": 0}, {"cached": 3}])
    head = {"id": f"chatcmpl-{rng.randrange(1 << 40):x}", "object": "chat.completion.chunk", "created": 1796203049,
            "model": rng.choice(["tiny", "m\"odel", "deepseek-r1"])}

    def chunk(delta: dict | None, text: str | None, ct: int, finish: str | None = None, **more) -> bytes:
        c0: dict = {"index": 0}
        if chat:
            c0["delta"] = delta
        else:
            c0["text"] = text
        c0.update({"logprobs": None, "finish_reason": finish, **extra_choice, **more})
        usage = {"prompt_tokens": pt, "total_tokens": pt + ct, "completion_tokens": ct}
        if details is not None:
            usage["completion_tokens_details"] = details
        return dumps({**head, "choices": [c0], "usage": usage}).encode()

    out = [chunk({"role": "assistant", "content": ""}, "", 0)]
    ct = 0
    for _ in range(rng.randint(1, 140)):
        ct += rng.choice([1, 1, 1, 1, 0, 2, 5])  # 0: a chunk whose usage did not rise
        if rng.random() < 0.05:
            field = rng.choice(["content", "reasoning_content", "reasoning"]) if chat else "text"
        text = _text(rng)
        delta = {field: text}
        if rng.random() < 0.04:
            delta = {field: text, "content" if field != "content" else "reasoning": _text(rng)}  # both sides
        out.append(chunk(delta, text, ct))
    ct += 1
    out.append(chunk({"content": "."}, ".", ct, rng.choice(["stop", "length"]), stop_reason=None))
    last = {**head, "choices": [], "usage": {"prompt_tokens": pt, "total_tokens": pt + ct, "completion_tokens": ct,
                                               "prompt_tokens_details": {"cached_tokens": 4}},
            "metrics": {"queue": 0.001, "spec": [1, 2]}}
    out.append(dumps(last).encode())
    out.append(b"[DONE]")
    return out


class DecodeOnly(StreamTally):
    """The reference: every chunk decoded whole."""

    __slots__ = ()

    def _learn(self, p, obj):  # never learns a shape
        pass


STATE = ("chunk_times", "chunk_tokens", "output_tokens", "usage_tokens", "finish_reason", "prompt_tokens", "texts",
         "t_reason", "t_answer", "reasoning", "pending", "split", "think", "done", "continuous", "kept")


def _state(t: StreamTally) -> dict:
    return {k: getattr(t, k) for k in STATE}


def _reads(rng: random.Random, payloads: list[bytes]) -> list[bytes]:
    """The stream's bytes as SSE events, cut into reads: mostly one event each, sometimes several or a split one."""
    wire = b"".join(b"data: " + p + b"\n\n" for p in payloads)
    ends = [i + 2 for i in range(len(wire)) if wire[i:i + 2] == b"\n\n"]
    cuts, at = [], 0
    for e in ends:
        r = rng.random()
        if r < 0.1:
            continue  # this event joins the next read
        if r < 0.15:
            cuts.append(rng.randint(at, e))  # a read ends mid-event
        cuts.append(e)
        at = e
    bounds = sorted(set([0, *cuts, len(wire)]))
    return [wire[a:b] for a, b in zip(bounds, bounds[1:], strict=False) if b > a]


@pytest.mark.parametrize("seed", range(60))
def test_scanned_stream_equals_the_decoded_one(seed: int) -> None:
    rng = random.Random(seed)
    payloads = stream(rng, chat=seed % 5 != 0)
    think = Think.INSIDE if rng.random() < 0.2 else None
    fast, ref = StreamTally(9), DecodeOnly(9)
    fast.kept, ref.kept = [], []
    if think is not None:
        fast.think = ref.think = think
    take = fast.reader(SSEParser())
    parser = SSEParser()
    scanned = 0
    for i, data in enumerate(_reads(rng, payloads)):
        before = fast.usage_tokens
        take(data, float(i))
        scanned += fast._framed is not None and before != fast.usage_tokens
        events = parser.feed(data)
        if events:
            ref.add(events, float(i))
    fast.add(SSEParser().close(), 0.0)
    assert _state(fast) == _state(ref)
    assert ref.done and ref.finished


def test_the_scan_reads_most_chunks_of_a_compact_stream() -> None:
    """Not a fallback that never fires: a compact stream's token chunks are scanned, not decoded."""
    rng = random.Random(7)
    payloads = stream(rng)
    while not payloads[1].startswith(b'{"id"') or b": " in payloads[1]:
        payloads = stream(rng)
    decoded: list[bytes] = []

    class Counting(StreamTally):
        __slots__ = ()

        def _learn(self, p, obj):  # called for every decoded token-bearing chunk
            decoded.append(p)
            super()._learn(p, obj)

    fast = Counting(9)
    take = fast.reader(SSEParser())
    for i, p in enumerate(payloads):
        take(b"data: " + p + b"\n\n", float(i))
    tokens = len(payloads) - 3  # the role chunk, the usage chunk and [DONE] carry none
    assert len(decoded) < tokens / 4 + 8, (len(decoded), tokens)


@pytest.mark.parametrize("seed", range(40))
def test_the_scan_refuses_what_the_decode_would_read_otherwise(seed: int) -> None:
    """A chunk of a learned shape, mutated: the scan returns what a full decode finds, or None."""
    rng = random.Random(1000 + seed)
    payloads = [p for p in stream(rng, chat=seed % 4 != 0)[1:-3]]
    shapes = []
    for p in payloads:
        shape = ChunkShape.learn(p, json.loads(p))
        if shape is not None:
            shapes.append(shape)
    if not shapes:  # a spaced stream: nothing learned, every chunk takes the full decode (tested above)
        return
    for p in rng.sample(payloads, min(len(payloads), 12)):
        for shape in shapes[:3]:
            for m in _mutants(rng, p):
                got = shape.match(m)
                if got is None:
                    continue
                obj = json.loads(m)  # raises when the scan accepted what is not JSON
                c0 = obj["choices"][0]
                text = c0["delta"][shape.field] if "delta" in c0 else c0["text"]
                assert got == (text, obj["usage"]["completion_tokens"]), m
                assert c0.get("finish_reason") is None and len(obj["choices"]) == 1


def _mutants(rng: random.Random, p: bytes) -> list[bytes]:
    out = [p, p + b" ", p[:-1], p.replace(b'"finish_reason":null', b'"finish_reason":"stop"'),
           p.replace(b"null", b"nul"), p.replace(b'":"', b'": "', 1)]
    for _ in range(12):
        i = rng.randrange(len(p))
        b = rng.choice(b'"\\{}[],: 0123456789ax\n\xff')
        if chr(b).isdigit() and (chr(p[i]).isdigit() or chr(p[i - 1]).isdigit()):
            continue  # a digit for or beside a digit is the same shape (a leading zero aside: documented)
        out.append(p[:i] + bytes([b]) + p[i + 1:])
        out.append(p[:i] + bytes([b]) + p[i:])
    return out


@pytest.mark.parametrize("name", names())
def test_recorded_vllm_transcripts_read_alike(name: str) -> None:
    """The contract transcripts (captured from the real engine), read in one event per read."""
    raw = load_transcript(name).body
    fast, ref = StreamTally(9), DecodeOnly(9)
    take, parser = fast.reader(SSEParser()), SSEParser()
    errors = []
    for i, event in enumerate(e for e in raw.split(b"\n\n") if e):
        data = event + b"\n\n"
        try:
            take(data, float(i))
        except StreamFault as e:
            errors.append(("fast", e.kind))
        try:
            if ev := parser.feed(data):
                ref.add(ev, float(i))
        except StreamFault as e:
            errors.append(("ref", e.kind))
    assert [k for s, k in errors if s == "fast"] == [k for s, k in errors if s == "ref"]
    assert _state(fast) == _state(ref)
