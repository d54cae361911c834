"""The OpenAI endpoints over HTTP against a real simulator process: shapes, SSE framing, prompt forms, errors."""

from __future__ import annotations

import http.client
import json

import pytest

from tests.server.sim.helpers import get, post, running_sim, sse_events, stream
from workload.tokenizers import load_tokenizer, render_chat

pytestmark = pytest.mark.slow  # every test here starts a real process

TOK = load_tokenizer("deepseek-v4")
MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Name three rivers."}]


@pytest.fixture(scope="module")
def sim():
    with running_sim("--time-scale", "20", "--eos-probability", "0") as proc:
        yield proc.port


def test_models_health_version(sim):
    status, body = get(sim, "/v1/models")
    card = json.loads(body)["data"][0]
    assert status == 200 and card["id"] == "sim-tiny" and card["object"] == "model" and card["max_model_len"] == 2048
    assert get(sim, "/health") == (200, b"")
    assert get(sim, "/version")[0] == 200


def test_streamed_completion_events_usage_and_done(sim):
    prompt = "The quick brown fox jumps over the lazy dog."
    events, done = stream(sim, "/v1/completions", {"model": "sim-tiny", "prompt": prompt, "max_tokens": 12,
                                                   "ignore_eos": True, "stream_options": {"include_usage": True}})
    assert done
    *tokens, usage = events
    assert len(tokens) == 12
    assert {e["id"] for e in events} == {tokens[0]["id"]} and tokens[0]["id"].startswith("cmpl-")
    assert all(e["object"] == "text_completion" and e["model"] == "sim-tiny" for e in events)
    assert all(e["choices"][0]["text"] for e in tokens)
    assert [e["choices"][0]["finish_reason"] for e in tokens] == [None] * 11 + ["length"]
    assert usage["choices"] == []
    n_prompt = len(TOK.encode(prompt, add_special_tokens=True).ids)
    assert usage["usage"] == {"prompt_tokens": n_prompt, "total_tokens": n_prompt + 12, "completion_tokens": 12}
    # a client that counts the streamed text with the same tokenizer agrees with usage
    text = "".join(e["choices"][0]["text"] for e in tokens)
    assert len(TOK.encode(text, add_special_tokens=False).ids) == 12


def test_streamed_chat_has_role_chunk_then_content_and_no_usage_unless_asked(sim):
    events, done = stream(sim, "/v1/chat/completions", {"messages": MESSAGES, "max_tokens": 5, "ignore_eos": True})
    assert done and len(events) == 6
    first, *rest = events
    assert first["object"] == "chat.completion.chunk"
    assert first["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert all(set(e["choices"][0]["delta"]) == {"content"} and e["choices"][0]["delta"]["content"] for e in rest)
    assert rest[-1]["choices"][0]["finish_reason"] == "length"
    assert all("usage" not in e for e in events)


def test_continuous_usage_counts_up_on_every_chunk(sim):
    events, done = stream(sim, "/v1/chat/completions", {
        "messages": MESSAGES, "max_tokens": 7, "ignore_eos": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True}})
    n_prompt = len(TOK.encode(render_chat(MESSAGES), add_special_tokens=False).ids)
    assert done and [e["usage"]["completion_tokens"] for e in events] == [0, 1, 2, 3, 4, 5, 6, 7, 7]
    assert all(e["usage"]["prompt_tokens"] == n_prompt for e in events)
    assert events[-1]["choices"] == []


def test_non_streamed_shapes(sim):
    status, _h, raw = post(sim, "/v1/completions", {"prompt": "hello", "max_tokens": 4, "ignore_eos": True})
    body = json.loads(raw)
    assert status == 200 and body["object"] == "text_completion"
    ch = body["choices"][0]
    assert ch["finish_reason"] == "length" and len(TOK.encode(ch["text"], add_special_tokens=False).ids) == 4
    assert body["usage"]["completion_tokens"] == 4 and body["usage"]["prompt_tokens"] == 1
    status, _h, raw = post(sim, "/v1/chat/completions", {"messages": MESSAGES, "max_completion_tokens": 3,
                                                         "ignore_eos": True})
    body = json.loads(raw)
    assert body["object"] == "chat.completion" and body["choices"][0]["message"]["role"] == "assistant"
    assert body["usage"]["completion_tokens"] == 3


@pytest.mark.parametrize("prompt, n_prompts, prompt_tokens", [
    ([11, 12, 13], 1, 3),
    ([[11, 12], [13, 14, 15, 16]], 2, 6),
    (["hello world", "good morning to you"], 2, 2 + len(TOK.encode("good morning to you").ids)),
])
def test_prompt_forms(sim, prompt, n_prompts, prompt_tokens):
    status, _h, raw = post(sim, "/v1/completions", {"prompt": prompt, "max_tokens": 3, "ignore_eos": True})
    body = json.loads(raw)
    assert status == 200 and [c["index"] for c in body["choices"]] == list(range(n_prompts))
    assert body["usage"] == {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens + 3 * n_prompts,
                             "completion_tokens": 3 * n_prompts, "prompt_tokens_details": None}


def test_streamed_batch_interleaves_choices_and_ends_once(sim):
    events, done = stream(sim, "/v1/completions", {"prompt": ["a b c", "d e"], "max_tokens": 4, "ignore_eos": True,
                                                   "stream_options": {"include_usage": True}})
    assert done
    per_choice = {0: 0, 1: 0}
    for e in events[:-1]:
        per_choice[e["choices"][0]["index"]] += 1
    assert per_choice == {0: 4, 1: 4}
    assert events[-1]["usage"]["completion_tokens"] == 8


def test_keep_alive_serves_several_requests_on_one_connection(sim):
    conn = http.client.HTTPConnection("127.0.0.1", sim, timeout=10)
    for _ in range(3):
        conn.request("POST", "/v1/completions", body=json.dumps({"prompt": "x", "max_tokens": 2, "stream": True}),
                     headers={"content-type": "application/json"})
        resp = conn.getresponse()
        assert resp.status == 200 and sse_events(resp.read())[-1] == b"[DONE]"
    conn.close()


def _error(raw: bytes) -> dict:
    body = json.loads(raw)
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}
    return body["error"]


def test_unknown_model_is_a_vllm_shaped_404(sim):
    status, _h, raw = post(sim, "/v1/chat/completions", {"model": "gpt-9", "messages": MESSAGES})
    err = _error(raw)
    assert status == 404 and err["type"] == "NotFoundError" and err["code"] == 404 and "gpt-9" in err["message"]


def test_context_overflow_is_a_400_naming_the_limit(sim):
    status, _h, raw = post(sim, "/v1/completions", {"prompt": [5] * 2000, "max_tokens": 100})
    err = _error(raw)
    assert status == 400 and err["type"] == "BadRequestError" and err["code"] == 400
    assert "2048" in err["message"] and "2100" in err["message"]
    status, _h, raw = post(sim, "/v1/completions", {"prompt": [5] * 2048})
    assert status == 400 and "2048 input tokens" in _error(raw)["message"]


@pytest.mark.parametrize("body, fragment", [
    (b"{not json", "JSON"),
    ({"prompt": "x", "stream_options": {"include_usage": True}}, "stream=True"),
    ({"prompt": "x", "max_tokens": 0}, "max_tokens"),
    ({"prompt": "x", "max_tokens": 3, "min_tokens": 5}, "min_tokens"),
    ({"prompt": [1, 2, 10**9]}, "out of vocabulary"),
    ({"prompt": 42}, "prompt must be"),
    ({"max_tokens": 3}, "prompt is required"),
    ({"prompt": "x", "n": 2}, "n=1"),
])
def test_bad_requests_are_400(sim, body, fragment):
    status, _h, raw = post(sim, "/v1/completions", body)
    assert status == 400 and fragment in _error(raw)["message"]


def test_unknown_path_and_wrong_method(sim):
    assert get(sim, "/v2/nothing")[0] == 404
    assert get(sim, "/v1/completions")[0] == 405


def test_tokenize_and_detokenize(sim):
    status, _h, raw = post(sim, "/tokenize", {"prompt": "hello world"})
    body = json.loads(raw)
    ids = TOK.encode("hello world").ids
    assert status == 200 and body == {"count": len(ids), "max_model_len": 2048, "tokens": ids, "token_strs": None}
    status, _h, raw = post(sim, "/tokenize", {"messages": MESSAGES})
    assert json.loads(raw)["count"] == len(TOK.encode(render_chat(MESSAGES), add_special_tokens=False).ids)
    status, _h, raw = post(sim, "/detokenize", {"tokens": ids})
    assert status == 200 and json.loads(raw) == {"prompt": "hello world"}
    assert post(sim, "/detokenize", {"tokens": "nope"})[0] == 400


def test_eos_stops_early_with_stop_and_respects_min_tokens():
    with running_sim("--time-scale", "20", "--eos-probability", "0.2") as proc:
        reasons, lengths = [], []
        for _ in range(12):
            events, done = stream(proc.port, "/v1/completions", {
                "prompt": "x", "max_tokens": 60, "min_tokens": 10, "stream_options": {"include_usage": True}})
            assert done
            reasons.append(events[-2]["choices"][0]["finish_reason"])
            lengths.append(events[-1]["usage"]["completion_tokens"])
        assert "stop" in reasons and all(n >= 11 for n in lengths)
        assert all(n < 60 for n, r in zip(lengths, reasons, strict=True) if r == "stop")
        # the EOS token counts in usage but carries no text, as in vLLM
        stops = [i for i, r in enumerate(reasons) if r == "stop"]
        assert stops
        events, _ = stream(proc.port, "/v1/completions", {"prompt": "x", "max_tokens": 30, "ignore_eos": True,
                                                          "stream_options": {"include_usage": True}})
        assert events[-1]["usage"]["completion_tokens"] == 30 and events[-2]["choices"][0]["finish_reason"] == "length"


def test_client_disconnect_mid_stream_aborts_the_engine_request(sim):
    import socket
    import time

    from tests.server.sim.helpers import metric_value

    def aborted() -> float:
        text = get(sim, "/metrics")[1].decode()
        return metric_value(text, "vllm:request_success_total", {"finished_reason": "abort"})

    before = aborted()
    body = json.dumps({"prompt": "x", "max_tokens": 1500, "ignore_eos": True, "stream": True}).encode()
    s = socket.create_connection(("127.0.0.1", sim), timeout=10)
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nhost: x\r\ncontent-length: %d\r\n\r\n%b" % (len(body), body))
    got = b""
    while b'"text"' not in got:  # headers first, then the first tokens
        chunk = s.recv(65536)
        assert chunk, got
        got += chunk
    s.close()
    for _ in range(100):
        if aborted() == before + 1:
            break
        time.sleep(0.05)
    text = get(sim, "/metrics")[1].decode()
    assert aborted() == before + 1 and metric_value(text, "vllm:num_requests_running") == 0
