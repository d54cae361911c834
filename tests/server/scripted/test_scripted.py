"""The scripted server: OpenAI-shaped streams on a known schedule, usage like vLLM, faults, counters."""

from __future__ import annotations

import http.client
import json
import threading
import time
import urllib.error
import urllib.request

import pytest

from tests.support import PY, Proc, free_port, wait_http
from users.sse import SSEParser

pytestmark = pytest.mark.slow  # every test here starts a real process


@pytest.fixture(scope="module")
def server():
    port = free_port()
    argv = [PY, "-m", "server.scripted", "--port", str(port), "--ttft-ms", "100", "--itl-ms", "10",
            "--tokens-per-chunk", "2", "--fault", "500,cut,nodone", "--fault-every", "5", "--stall-s", "1"]
    with Proc(argv, name="scripted") as proc:
        host = f"http://127.0.0.1:{port}"
        wait_http(f"{host}/health", proc=proc)
        yield host, port


def post(host: str, path: str, body: dict) -> tuple[int, bytes]:
    req = urllib.request.Request(
        host + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def stream(port: int, path: str, body: dict) -> tuple[list[tuple[float, bytes]], float]:
    """(arrival time, payload) of every event of one streamed request, and the send time."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    t0 = time.perf_counter()
    conn.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    parser, events = SSEParser(), []
    while chunk := resp.read1(65536):  # de-chunked bytes as they arrive
        t = time.perf_counter()
        events += [(t, p) for p in parser.feed(chunk)]
    conn.close()
    return events, t0


def chat(max_tokens: int) -> dict:
    return {"messages": [{"role": "user", "content": " hello world"}], "max_tokens": max_tokens, "stream": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True}}


def test_models_stats_tokenize_and_404(server) -> None:
    host, _ = server
    with urllib.request.urlopen(f"{host}/v1/models") as r:
        assert json.loads(r.read())["data"][0]["id"] == "scripted"
    status, body = post(host, "/tokenize", {"prompt": "hello world"})
    assert status == 200 and json.loads(body)["count"] == 2
    status, body = post(host, "/tokenize", {"messages": [{"role": "user", "content": " hello world"}]})
    assert json.loads(body)["count"] == 5  # BOS, User, 2 words, Assistant
    assert post(host, "/nope", {})[0] == 404


def test_stream_schedule_usage_and_faults_in_rotation(server) -> None:
    host, port = server
    with urllib.request.urlopen(f"{host}/stats") as r:
        counted = json.loads(r.read())
    before = counted.get("requests", 0)
    assert before % 5 == 0  # this test owns the rotation: requests 1..5 here, the 5th is the fault
    results = [stream(port, "/v1/chat/completions", chat(7)) for _ in range(4)]
    for events, t0 in results:
        payloads = [p for _, p in events]
        assert payloads[-1] == b"[DONE]"
        objs = [json.loads(p) for p in payloads[:-1]]
        assert objs[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
        assert [o["usage"]["completion_tokens"] for o in objs] == [0, 2, 4, 6, 7, 7]
        assert objs[-1]["choices"] == [] and objs[-2]["choices"][0]["finish_reason"] == "length"
        token_times = [t - t0 for t, p in events[1:5]]
        # chunk j at 100 + j * 2 * 10 ms (generous upper bound: a busy box)
        for j, dt in enumerate(token_times):
            assert 0.100 + 0.020 * j - 0.001 <= dt <= 0.100 + 0.020 * j + 0.030, (j, dt)
    assert post(host, "/v1/chat/completions", chat(3))[0] == 500  # request 5 of 5: the first fault
    with urllib.request.urlopen(f"{host}/stats") as r:
        stats = json.loads(r.read())
    assert stats["requests"] == before + 5
    # exactly one fault in these five requests, the 500; no other kind fired
    fired = {k: stats.get(k, 0) - counted.get(k, 0) for k in ("fault_500", "fault_cut", "fault_nodone")}
    assert fired == {"fault_500": 1, "fault_cut": 0, "fault_nodone": 0}
    assert stats["late_ms"]["p50"] < 20


@pytest.mark.exclusive  # the server's own clock to the ms: the box to itself (a busy one delayed it 86 ms)
def test_schedule_is_per_request_under_concurrency(server) -> None:
    """Streams started together each keep their own clock (first token ~100 ms after their own send)."""
    _, port = server
    out: list[float] = []

    def one() -> None:
        events, t0 = stream(port, "/v1/completions", {"prompt": "x", "max_tokens": 4, "stream": True})
        out.append(events[0][0] - t0)

    threads = [threading.Thread(target=one) for _ in range(4)]  # 4 requests: no fault (request 6..9)
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(out) == 4 and all(0.099 <= x <= 0.150 for x in out), out


def test_batch_completion_answers_every_prompt(server) -> None:
    host, _ = server
    status, body = post(host, "/v1/completions", {"prompt": ["a", "b c"], "max_tokens": 3})
    obj = json.loads(body)
    assert status == 200 and len(obj["choices"]) == 2
    assert obj["usage"]["completion_tokens"] == 6 and obj["usage"]["prompt_tokens"] == 3


def test_clock_starts_at_arrival_and_stats_say_what_was_sent(server) -> None:
    """The schedule starts when the request reached the host (kernel receive stamp), not when the loop
    read it: x-scripted-start lies between the client's send call and its return (loopback delivers
    inside send). /stats reports the timing the server really produced, which clients are tested on."""
    host, port = server
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.connect()
    body = json.dumps({"prompt": "x", "max_tokens": 6, "stream": True})
    t0 = time.perf_counter()
    conn.request("POST", "/v1/completions", body=body, headers={"Content-Type": "application/json"})
    t1 = time.perf_counter()
    resp = conn.getresponse()
    start = float(resp.getheader("x-scripted-start"))
    while resp.read1(65536):
        pass
    conn.close()
    assert t0 <= start <= t1 + 20e-6, (start - t0, t1 - t0)
    with urllib.request.urlopen(f"{host}/stats") as r:
        stats = json.loads(r.read())
    # 100 ms to the first chunk, then chunks of 2 tokens 20 ms apart: 10 ms per token
    assert 100.0 <= stats["ttft_sent_ms"]["p50"] <= 100.0 + stats["late_ms"]["max"] + 0.5
    assert 9.0 <= stats["itl_sent_ms"]["p50"] <= 11.0


def test_burst_mode_writes_whole_streams_with_their_own_ids_and_counts_them() -> None:
    """--ttft-ms 0 --itl-ms 0 (bench.scaling's server): each answer rendered once and reused, yet every request gets
    its own id and a complete stream (role chunk, one chunk per token with running usage, usage, [DONE])."""
    port = free_port()
    argv = [PY, "-m", "server.scripted", "--port", str(port), "--ttft-ms", "0", "--itl-ms", "0", "--tokenizer", "none",
            "--selector", "epoll"]
    with Proc(argv, name="scripted-burst") as proc:
        wait_http(f"http://127.0.0.1:{port}/health", proc=proc)
        streams = [stream(port, "/v1/chat/completions", chat(7))[0] for _ in range(3)]
        runs = [[json.loads(p) if p != b"[DONE]" else p for _t, p in events] for events in streams]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/stats", timeout=5) as r:
            stats = json.loads(r.read())
    for events in runs:
        assert events[-1] == b"[DONE]" and events[-2]["usage"]["completion_tokens"] == 7 and not events[-2]["choices"]
        tokens = [e for e in events[1:-2] if e["choices"][0]["delta"].get("content")]
        assert [e["usage"]["completion_tokens"] for e in tokens] == list(range(1, 8))
        assert tokens[-1]["choices"][0]["finish_reason"] == "length"
        assert events[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    ids = [{e["id"].strip() for e in events if isinstance(e, dict)} for events in runs]
    assert all(len(i) == 1 for i in ids) and len(set.union(*ids)) == 3, ids
    assert stats["completed"] == 3 and stats["tokens_sent"] == stats["output_tokens"] == 21
