"""A stream short enough to arrive whole with the headers: geventhttpclient may already have handed the
socket back to its pool (``resp._sock is None``); the client must read what it has, not crash."""

from __future__ import annotations

import pytest

from users.client import LLMError, _read_stream
from users.inflight import LiveRequest
from users.tally import StreamTally

BODY = (
    b'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}\n\n'
    b'data: {"choices":[{"index":0,"delta":{"content":"Hi"}}],"usage":{"prompt_tokens":5,"completion_tokens":1}}\n\n'
    b'data: {"choices":[{"index":0,"delta":{"content":" yo"}}],"usage":{"prompt_tokens":5,"completion_tokens":2}}\n\n'
    b"data: [DONE]\n\n"
)


class _Released:
    """What a geventhttpclient response looks like after release(): body buffered, no socket."""

    def __init__(self, body: bytes, complete: bool) -> None:
        self._sock = None
        self._body_buffer = bytearray(body)
        self.message_complete = complete
        self._on_body = None


def test_whole_stream_with_the_headers_is_counted_without_a_socket():
    tally = StreamTally()
    _read_stream(_Released(BODY, complete=True), tally, LiveRequest(tally))
    assert tally.output_tokens == 2  # the role-only chunk carries no token


def test_released_socket_before_the_end_is_a_stream_cut():
    tally = StreamTally()
    with pytest.raises(LLMError) as e:
        _read_stream(_Released(BODY[:80], complete=False), tally, LiveRequest(tally))
    assert e.value.kind == "stream_cut"
