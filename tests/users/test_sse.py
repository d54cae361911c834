"""The SSE framer: every framing case an LLM stream can produce, fed whole and in every split."""

from __future__ import annotations

import json

import pytest

from tests.fixtures.sse import load_transcript, names
from users.sse import SSEParser


def feed_in(parts: list[bytes]) -> tuple[list[bytes], SSEParser]:
    p = SSEParser()
    out: list[bytes] = []
    for part in parts:
        out += p.feed(part)
    return out + p.close(), p


def every_split(data: bytes) -> list[list[bytes]]:
    """The stream whole, byte by byte, and cut once at every position."""
    return [[data], [data[i : i + 1] for i in range(len(data))]] + [[data[:i], data[i:]] for i in range(len(data))]


def test_one_event() -> None:
    assert feed_in([b'data: {"a": 1}\n\n'])[0] == [b'{"a": 1}']


def test_event_split_across_reads_is_held_until_complete() -> None:
    p = SSEParser()
    assert p.feed(b'data: {"a"') == []
    assert p.pending == len(b'data: {"a"')
    assert p.feed(b": 1}\n") == []
    assert p.feed(b"\n") == [b'{"a": 1}']
    assert p.pending == 0


def test_several_events_in_one_read() -> None:
    data = b"data: 1\n\ndata: 2\n\ndata: [DONE]\n\n"
    assert feed_in([data])[0] == [b"1", b"2", b"[DONE]"]


@pytest.mark.parametrize("eol", [b"\n", b"\r\n", b"\r"])
def test_line_ends_lf_crlf_cr_in_every_split(eol: bytes) -> None:
    data = b"data: one" + eol + eol + b": ping" + eol + eol + b"data: a" + eol + b"data: b" + eol + eol
    for parts in every_split(data):
        assert feed_in(parts)[0] == [b"one", b"a\nb"], parts


def test_crlf_split_between_cr_and_lf_makes_no_extra_blank_line() -> None:
    p = SSEParser()
    assert p.feed(b"data: a\r") == []
    assert p.feed(b"\ndata: b\r\n\r\n") == [b"a\nb"]


def test_comments_and_keepalives_are_not_events() -> None:
    out, p = feed_in([b": ping\n\n:\n\ndata: x\n: inside\n\n: ping\n\n"])
    assert out == [b"x"]
    assert p.comments == 4


def test_multiline_data_joins_with_newline() -> None:
    assert feed_in([b'data: {\ndata: "a": 1\ndata: }\n\n'])[0] == [b'{\n"a": 1\n}']


def test_field_without_space_and_other_fields() -> None:
    data = b'event: message\nid: 7\nretry: 1000\ndata:{"x":1}\n\nevent: ping\n\n'
    assert feed_in([data])[0] == [b'{"x":1}']


def test_empty_data_value_is_dispatched_as_empty_payload() -> None:
    assert feed_in([b"data:\n\n", b"data: \n\n"])[0] == [b"", b""]


def test_leading_blank_lines_between_events() -> None:
    assert feed_in([b"data: a\n\n\n\ndata: b\n\n"])[0] == [b"a", b"b"]


def test_done_and_error_object_are_plain_payloads() -> None:
    err = {"error": {"message": "boom", "type": "InternalServerError", "code": 500}}
    data = b"data: " + json.dumps(err).encode() + b"\n\ndata: [DONE]\n\n"
    out = feed_in([data])[0]
    assert json.loads(out[0]) == err
    assert out[1] == b"[DONE]"


def test_utf8_character_split_across_reads_decodes_once_whole() -> None:
    text = 'data: {"c": "中文😀"}\n\n'.encode()
    cut = text.index("中".encode()) + 1  # inside the 3-byte character
    p = SSEParser()
    assert p.feed(text[:cut]) == []
    (payload,) = p.feed(text[cut:])
    assert json.loads(payload) == {"c": "中文😀"}
    for parts in every_split(text):
        assert [json.loads(x) for x in feed_in(parts)[0]] == [{"c": "中文😀"}]


def test_close_keeps_a_complete_last_event_without_blank_line_and_drops_a_partial_line() -> None:
    p = SSEParser()
    assert p.feed(b"data: [DONE]\n") == []
    assert p.close() == [b"[DONE]"]
    p = SSEParser()
    p.feed(b"data: [DO")
    assert p.close() == []


@pytest.mark.parametrize("name", [n for n in names() if load_transcript(n).ok])
def test_recorded_vllm_streams_frame_identically_in_any_split(name: str) -> None:
    t = load_transcript(name)
    whole = feed_in([t.body])[0]
    assert whole == t.payloads and whole[-1] == b"[DONE]"
    step = max(1, len(t.body) // 97)
    for cut in range(0, len(t.body), step):
        assert feed_in([t.body[:cut], t.body[cut:]])[0] == whole
    crlf = t.body.replace(b"\n", b"\r\n")
    assert feed_in([crlf[i : i + 7] for i in range(0, len(crlf), 7)])[0] == whole


def test_an_event_that_never_ends_is_bad_chunk_past_one_mib_not_unbounded_memory():
    from users.faults import StreamFault  # noqa: PLC0415
    from users.sse import MAX_EVENT  # noqa: PLC0415

    p = SSEParser()
    line = b"data: " + b"x" * (16 * 1024)
    for _ in range(MAX_EVENT // len(line)):
        assert p.feed(line) == []
    assert p.pending <= MAX_EVENT
    with pytest.raises(StreamFault) as e:
        p.feed(line)
    assert e.value.kind == "bad_chunk" and str(e.value).startswith("bad_chunk: an SSE event over 1 MiB without its end")
    # an event just under the cap is still read whole
    q = SSEParser()
    big = b"y" * (MAX_EVENT - 100)
    assert q.feed(b"data: " + big[:500000]) == [] and q.feed(big[500000:] + b"\n\n") == [big]
