"""Failure paths of one LLM request, each against a hostile in-process server (tests/users/hostile.py).

Every test runs a real Locust user (the users plugin installed, as the locustfile does) and reads the
``request`` event it fires: the exception (``<kind>: <detail>``, the failure table's text) and the
``context["llm_result"]`` GenerationResult. Kinds and messages are the contract of users/client.py.
"""

from __future__ import annotations

import json

import gevent
import pytest

from tests.users.hostile import LAST_CHUNK, chunk, first_request, hostile, http, run_user, sse_head
from users import BatchCompletionUser, StreamingChatUser, StreamingCompletionUser
from workload.tokenizers import load_tokenizer

TIMEOUT = ("--request-timeout", "0.5")


def _reply(raw: bytes, keep: bool = True):
    def answer(sock, _req):
        sock.sendall(raw)
        return keep

    return answer


def _failed(run, kind: str, message: str) -> None:
    """The request failed as ``kind`` with exactly ``message``, in the result and in the Locust event."""
    r = run.result
    assert (r.ok, r.error_kind) == (False, kind), (r.error_kind, r.error_message)
    assert r.error_message == message
    assert str(run.exception) == message
    assert run.events[0]["response_length"] == r.output_tokens


def _stalled(seconds: float = 5.0):
    def answer(_sock, _req):
        gevent.sleep(seconds)
        return False

    return answer


# ---- `empty`: a well-formed answer without a single token ------------------------------------------


@pytest.mark.parametrize(
    ("user", "events"),
    [
        (StreamingChatUser, [b'{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}',
                             b'{"choices":[{"index":0,"delta":{"content":""},"finish_reason":"stop"}]}',
                             b'{"choices":[],"usage":{"prompt_tokens":16,"completion_tokens":0}}']),
        (StreamingCompletionUser, [b'{"choices":[{"index":0,"text":""}]}',
                                   b'{"choices":[{"index":0,"text":"","finish_reason":"stop"}]}']),  # no usage
    ],
    ids=["chat-usage-0", "completion-no-usage"],
)
def test_empty_stream_is_empty_not_ok(user, events):
    with hostile(_reply(sse_head() + chunk(*events, b"[DONE]") + LAST_CHUNK)) as (host, reqs):
        run = first_request(user, host)
    assert reqs[0].json()["stream"] is True
    _failed(run, "empty", "empty: the stream carried no token")
    assert run.result.output_tokens == 0 and len(run.result.chunk_times) == 0 and run.result.ttft_s is None


@pytest.mark.parametrize(
    "body",
    [
        {"choices": [{"index": 0, "text": "", "finish_reason": "stop"}],
         "usage": {"prompt_tokens": 16, "completion_tokens": 0}},
        {"choices": [{"index": 0, "text": "", "finish_reason": "stop"}]},  # no usage: the tokenizer counts 0
    ],
    ids=["usage-0", "no-usage"],
)
def test_empty_non_streaming_answer_is_empty(body):
    with hostile(_reply(http(200, json.dumps(body).encode()))) as (host, _):
        run = first_request(BatchCompletionUser, host, "--batch-size", "1")
    _failed(run, "empty", "empty: the response carried no token")


# ---- every non-streaming failure ---------------------------------------------------------------------


def test_non_streaming_body_cut_short_is_stream_cut():
    part = b'{"choices":[{"index":0,"text":"abc'
    with hostile(_reply(http(200, part, length=4000), keep=False)) as (host, reqs):
        run = first_request(BatchCompletionUser, host)
    # the HTTP parser sees the connection end before Content-Length bytes
    _failed(run, "stream_cut", "stream_cut: HTTPParseError while reading the body: Incomplete response.")
    assert len(reqs) == 1  # not retried behind the user's back


def test_non_streaming_body_that_stalls_times_out_at_the_request_timeout():
    def answer(sock, _req):
        sock.sendall(http(200, b'{"choices":[{"ind', length=4000))
        gevent.sleep(5)
        return False

    with hostile(answer) as (host, _):
        run = first_request(BatchCompletionUser, host, *TIMEOUT)
    _failed(run, "timeout", "timeout: no byte for the request timeout after 0 tokens")
    assert 0.5 <= run.result.e2e_s < 2.0


def test_timeout_before_the_response_headers():
    with hostile(_stalled()) as (host, _):
        run = first_request(StreamingCompletionUser, host, *TIMEOUT)
    _failed(run, "timeout", "timeout: no byte for the request timeout after 0 tokens")
    r = run.result
    assert 0.5 <= r.e2e_s < 2.0, r.e2e_s  # not before the timeout, and not long after it
    assert r.ttft_s is None and r.output_tokens == 0


def test_timeout_before_the_headers_without_the_stall_watch_uses_the_socket_timeout():
    # an Environment without the users plugin (library use): the socket's own timeout ends the wait
    with hostile(_stalled()) as (host, _):
        run = run_user(BatchCompletionUser, host, *TIMEOUT, plugin=False)
    _failed(run, "timeout", "timeout: no response headers within the request timeout")
    assert 0.5 <= run.result.e2e_s < 2.0


def test_non_json_body_is_bad_chunk_quoting_it():
    with hostile(_reply(http(200, b"<html>upstream hiccup</html>\n", "text/html"))) as (host, _):
        run = first_request(BatchCompletionUser, host)
    _failed(run, "bad_chunk", "bad_chunk: response is not JSON: <html>upstream hiccup</html>")


@pytest.mark.parametrize(
    "body",
    [
        b'{"object":"error","message":"max_tokens is too large","type":"BadRequestError","code":400}',
        b'{"error":{"message":"engine overloaded","code":503}}',
    ],
    ids=["object-error", "error-field"],
)
def test_http_200_carrying_an_error_is_server_error(body):
    with hostile(_reply(http(200, body))) as (host, _):
        run = first_request(BatchCompletionUser, host)
    _failed(run, "server_error", "server_error: " + body.decode())


@pytest.mark.parametrize("body", [b'{"id":"cmpl-1","object":"text_completion"}', b'{"id":"c","choices":[]}', b"[1]"])
def test_answer_without_choices_is_bad_chunk(body):
    with hostile(_reply(http(200, body))) as (host, _):
        run = first_request(BatchCompletionUser, host)
    _failed(run, "bad_chunk", "bad_chunk: response has no choices: " + body.decode())


def test_answer_without_usage_is_counted_by_the_client_tokenizer():
    texts = ["Hello world, this is a longer sentence.", " Tokenizers split ünïcode and numbers 12345 too."]
    body = {"choices": [{"index": i, "text": t, "finish_reason": "length"} for i, t in enumerate(texts)]}
    with hostile(_reply(http(200, json.dumps(body).encode()))) as (host, reqs):
        run = first_request(BatchCompletionUser, host, "--batch-size", "2")
    tok = load_tokenizer("deepseek-v4")  # the default --tokenizer
    want = sum(len(tok.encode(t, add_special_tokens=False).ids) for t in texts)
    assert want > 2 * len(texts)  # not a count of choices or of words
    r = run.result
    assert r.ok and r.token_source == "tokenizer" and r.output_tokens == want
    assert run.events[0]["response_length"] == want and run.exception is None
    # no usage: the prompt count is the client's (2 prompts of 16 tokens)
    assert r.prompt_tokens == r.prompt_tokens_client == 32 and r.meta.batch_size == 2
    assert len(reqs[0].json()["prompt"]) == 2


def test_answer_with_usage_takes_the_servers_counts():
    body = {"choices": [{"index": 0, "text": "hi"}], "usage": {"prompt_tokens": 17, "completion_tokens": 7}}
    with hostile(_reply(http(200, json.dumps(body).encode()))) as (host, _):
        run = first_request(BatchCompletionUser, host, "--batch-size", "1")
    r = run.result
    assert r.ok and (r.token_source, r.output_tokens, r.prompt_tokens, r.prompt_tokens_client) == ("usage", 7, 17, 16)


# ---- broken HTTP framing: where it breaks decides the kind, not how the bytes were packeted --------------

_TOKEN = b'{"choices":[{"index":0,"delta":{"content":"tok "}}]}'


def test_garbage_chunk_in_the_headers_own_packet_is_a_stream_cut():
    # one sendall: the status, the headers, a token and a broken chunk size reach the parser in one read
    raw = sse_head() + chunk(_TOKEN) + b"zz-not-a-size\r\ngarbage\r\n"
    with hostile(_reply(raw, keep=False)) as (host, _):
        run = first_request(StreamingChatUser, host)
    r = run.result
    assert (r.ok, r.error_kind) == (False, "stream_cut"), r.error_message
    assert r.error_message.startswith("stream_cut: HTTPParseError after the headers: "), r.error_message


def test_garbage_chunk_after_a_token_read_is_a_stream_cut_after_that_token():
    def answer(sock, _req):
        sock.sendall(sse_head() + chunk(_TOKEN))
        gevent.sleep(0.3)
        sock.sendall(b"zz-not-a-size\r\ngarbage\r\n")
        return False

    with hostile(answer) as (host, _):
        run = first_request(StreamingChatUser, host)
    assert run.result.error_kind == "stream_cut"
    assert run.result.error_message.startswith("stream_cut: HTTPParseError after 1 tokens: "), run.result.error_message


def test_garbage_before_the_headers_end_is_a_connection_failure():
    with hostile(_reply(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\x01bad header\r\n\r\n", keep=False)
                 ) as (host, _):
        run = first_request(StreamingChatUser, host)
    assert run.result.error_kind == "connection", run.result.error_message
    assert run.result.error_message.startswith("connection: HTTPParseError: "), run.result.error_message


# ---- HTTP error bodies: quoted, stripped, cut at 300 characters ----------------------------------------


@pytest.mark.parametrize(
    ("status", "kind"), [(500, "http_5xx"), (503, "http_5xx"), (429, "http_429"), (400, "http_4xx"), (404, "http_4xx")]
)
def test_error_status_kinds_quote_the_body(status, kind):
    body = b'  {"object":"error","message":"no"}\n'
    with hostile(_reply(http(status, body))) as (host, _):
        run = first_request(StreamingChatUser, host)
    _failed(run, kind, f'{kind}: HTTP {status}: {{"object":"error","message":"no"}}')


def test_error_body_longer_than_300_characters_is_cut_with_an_ellipsis():
    body = ("é" + "x" * 298 + "END" + "y" * 2000).encode()
    with hostile(_reply(http(500, body))) as (host, _):
        run = first_request(StreamingChatUser, host)
    _failed(run, "http_5xx", "http_5xx: HTTP 500: " + "é" + "x" * 298 + "E" + "…")  # 300 characters, not bytes


def test_error_body_of_exactly_300_characters_is_whole():
    body = ("z" * 300).encode()
    with hostile(_reply(http(502, body))) as (host, _):
        run = first_request(StreamingCompletionUser, host)
    _failed(run, "http_5xx", "http_5xx: HTTP 502: " + "z" * 300)


def test_huge_error_body_is_not_read_whole_and_still_quoted():
    body = b"q" * (1024 * 1024)  # 1 MiB: the client stops at its 64 KiB limit
    with hostile(_reply(http(500, body), keep=False)) as (host, _):
        run = first_request(StreamingChatUser, host)
    _failed(run, "http_5xx", "http_5xx: HTTP 500: " + "q" * 300 + "…")


def test_error_body_cut_short_quotes_what_came_and_binary_is_replaced():
    part = b"upstream \xff\xfe died"
    with hostile(_reply(http(502, part, "text/plain", length=5000), keep=False)) as (host, _):
        run = first_request(StreamingChatUser, host)
    _failed(run, "http_5xx", "http_5xx: HTTP 502: upstream \ufffd\ufffd died")


def test_stream_error_status_is_not_read_as_a_stream():
    # a 500 with an SSE content type: still an HTTP error quoting its body, never a stream fault
    body = chunk(b'{"error":{"message":"boom"}}')
    raw = f"HTTP/1.1 500 X\r\nContent-Type: text/event-stream\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body
    with hostile(_reply(raw)) as (host, _):
        run = first_request(StreamingChatUser, host)
    r = run.result
    assert r.error_kind == "http_5xx" and r.error_message.startswith("http_5xx: HTTP 500: ")
    assert 'data: {"error":{"message":"boom"}}' in r.error_message


def test_error_body_that_stalls_is_still_the_http_error_quoting_what_came():
    # the status is known: a stalled error body ends at the request timeout as the HTTP error, with or
    # without the stall watch (the socket timeout path always did so)
    def answer(sock, _req):
        sock.sendall(http(503, b'{"message": "overloa', length=500))
        gevent.sleep(5)
        return False

    for plugin in (True, False):
        with hostile(answer) as (host, _):
            run = run_user(StreamingChatUser, host, *TIMEOUT, plugin=plugin)
        _failed(run, "http_5xx", 'http_5xx: HTTP 503: {"message": "overloa')
        assert 0.5 <= run.result.e2e_s < 2.0


def test_non_streaming_body_arriving_slowly_is_not_a_timeout():
    # --request-timeout is "no byte for this long", not a limit on the whole answer: a body that keeps
    # arriving (a byte every 50 ms for ~1.3 s, timeout 0.5 s) is read to its end
    text = "hello there friend"
    body = json.dumps({"choices": [{"index": 0, "text": text}]}).encode()

    def answer(sock, _req):
        sock.sendall(http(200, b"", length=len(body)))
        for i in range(0, len(body), 2):
            sock.sendall(body[i : i + 2])
            gevent.sleep(0.05)
        return True

    with hostile(answer) as (host, _):
        run = first_request(BatchCompletionUser, host, *TIMEOUT, "--batch-size", "1")
    r = run.result
    assert r.ok, r.error_message
    want = len(load_tokenizer("deepseek-v4").encode(text, add_special_tokens=False).ids)
    assert r.e2e_s > 1.0 and r.output_tokens == want
