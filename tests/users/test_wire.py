"""The POST writer (users/wire.py): the bytes on the wire, its checks, its cache, and a real exchange through it."""

from __future__ import annotations

import socket
import threading

import orjson
import pytest
from geventhttpclient.client import HTTPClient

import users.wire as wire
from users.client import Call, exchange
from users.result import RequestMeta

EXTRA = (("X-Request-Id", "1a2b3c4d-0-7"), ("traceparent", "00-1a2b3c4d000000000000000000000007-8000000000000007-01"))


def _parse(raw: bytes) -> tuple[str, list[tuple[str, str]], bytes]:
    head, _, body = raw.partition(b"\r\n\r\n")
    line, *fields = head.decode("latin-1").split("\r\n")
    return line, [tuple(f.split(": ", 1)) for f in fields], body  # type: ignore[misc]


def test_a_request_has_the_line_the_defaults_the_targets_headers_its_own_and_its_length() -> None:
    http = HTTPClient("127.0.0.1", 8123)
    raw = wire.render(http, "/v1/chat/completions", {"Content-Type": "application/json"}, EXTRA, b'{"a":1}')
    line, fields, body = _parse(raw)
    assert line == "POST /v1/chat/completions HTTP/1.1" and body == b'{"a":1}'
    names = [k for k, _ in fields]
    assert names == ["User-Agent", "Content-Type", "Host", "X-Request-Id", "traceparent", "Content-Length"]
    got = dict(fields)
    assert got["Host"] == "127.0.0.1:8123" and got["Content-Length"] == "7" and got["X-Request-Id"] == EXTRA[0][1]
    assert got["User-Agent"] == http.default_headers["User-Agent"]


def test_a_targets_header_overrides_a_default_whatever_its_case_and_host_is_not_doubled() -> None:
    http = HTTPClient("::1", 80)
    _line, fields, _ = _parse(wire.render(http, "/v1/completions", {"user-agent": "me"}, (), b""))
    assert fields == [("user-agent", "me"), ("Host", "[::1]"), ("Content-Length", "0")]
    _line, fields, _ = _parse(wire.render(http, "/x", {"HOST": "front.example"}, (), b""))
    assert [k for k, _ in fields].count("HOST") == 1 and "Host" not in dict(fields)


def test_the_head_is_rendered_once_per_target_and_headers() -> None:
    http = HTTPClient("127.0.0.1", 8124)
    a = wire.head(http, "/v1/completions", {"Content-Type": "application/json"})
    assert wire.head(http, "/v1/completions", {"Content-Type": "application/json"}) is a
    assert wire.head(http, "/v1/completions", {"Content-Type": "text/plain"}) is not a


@pytest.mark.parametrize(
    ("path", "headers", "extra"),
    [
        ("/v1/completions", {"Bad Name": "x"}, ()),
        ("/v1/completions", {"X-Ok": "a\r\nInjected: 1"}, ()),
        ("/v1/completions", {}, (("X-Request-Id", "r\n1"),)),
        ("//evil/v1", {}, ()),
        ("/v1/a b", {}, ()),
        ("v1/completions", {}, ()),
    ],
)
def test_a_malformed_path_or_field_is_refused_before_anything_is_sent(path, headers, extra) -> None:
    with pytest.raises(ValueError, match="invalid"):
        wire.render(HTTPClient("127.0.0.1", 8125), path, headers, extra, b"{}")


def _one_answer_server(answer: bytes, seen: list[bytes]) -> tuple[socket.socket, threading.Thread]:
    srv = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        conn, _ = srv.accept()
        with conn:
            data = b""
            while b"\r\n\r\n" not in data or len(data.partition(b"\r\n\r\n")[2]) < int(
                dict(f.split(b": ", 1) for f in data.partition(b"\r\n\r\n")[0].split(b"\r\n")[1:])[b"Content-Length"]
            ):
                data += conn.recv(65536)
            seen.append(data)
            conn.sendall(answer)

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    return srv, t


def test_an_exchange_writes_its_call_through_the_writer_and_reads_the_stream() -> None:
    chunk = b'data: {"choices":[{"index":0,"text":"hi","finish_reason":"length"}],' \
            b'"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}\n\ndata: [DONE]\n\n'
    answer = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\n\r\n%s" % (len(chunk), chunk)
    seen: list[bytes] = []
    srv, t = _one_answer_server(answer, seen)
    http = HTTPClient("127.0.0.1", srv.getsockname()[1])
    body = orjson.dumps({"prompt": "x", "max_tokens": 1, "stream": True})
    call = Call(path="/v1/completions", body=body, headers={"Content-Type": "application/json"}, extra=EXTRA,
                meta=RequestMeta(max_tokens=1, user_class="t", name="t"), stream=True, prompt_tokens_client=3)
    try:
        r = exchange(http, call)
    finally:
        http.close()
        srv.close()
    t.join(5)
    assert r.ok and r.output_tokens == 1, r.error_message
    line, fields, sent_body = _parse(seen[0])
    assert line == "POST /v1/completions HTTP/1.1" and sent_body == body
    assert dict(fields)["traceparent"] == EXTRA[1][1] and dict(fields)["Content-Length"] == str(len(body))


def test_a_client_behind_a_proxy_sends_through_geventhttpclients_own_request(monkeypatch) -> None:
    """The proxy wants the absolute-form request line and its credentials: geventhttpclient's request writes those."""
    http = HTTPClient("127.0.0.1", 8126, proxy_host="127.0.0.1", proxy_port=8127)
    seen = []
    monkeypatch.setattr(http, "request", lambda *a, **kw: seen.append((a, kw)) or "response")
    assert wire.post(http, "/v1/completions", {"Content-Type": "application/json"}, EXTRA, b"{}") == "response"
    assert seen == [(("POST", "/v1/completions"),
                     {"body": b"{}", "headers": {"Content-Type": "application/json", **dict(EXTRA)}})]

