"""Fault injection over HTTP: each kind fails the way it says, and the server keeps serving afterwards."""

from __future__ import annotations

import http.client
import json
import socket

import pytest

from tests.server.sim.helpers import post, running_sim

BODY = {"prompt": "x", "max_tokens": 40, "ignore_eos": True, "stream": True}


def _raw_stream(port: int, body: dict, timeout: float) -> tuple[bytes, str]:
    """Read a response's raw bytes until the server closes, the stream ends, or ``timeout`` passes."""
    data = json.dumps(body).encode()
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
              b"content-length: %d\r\n\r\n%b" % (len(data), data))
    buf = b""
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return buf, "closed"
            buf += chunk
            if buf.endswith(b"0\r\n\r\n"):
                return buf, "complete"
    except TimeoutError:
        return buf, "timeout"
    finally:
        s.close()


@pytest.mark.parametrize("kind", ["500", "429"])
def test_immediate_error_statuses(kind):
    with running_sim("--time-scale", "20", "--fault-rate", "1", "--fault-kinds", kind) as proc:
        status, headers, raw = post(proc.port, "/v1/completions", {k: v for k, v in BODY.items() if k != "stream"})
        err = json.loads(raw)["error"]
        assert status == int(kind) and err["code"] == int(kind) and "fault" in err["message"]
        if kind == "429":
            assert headers["retry-after"] == "1"


def test_cut_closes_mid_stream_without_done():
    with running_sim("--time-scale", "20", "--fault-rate", "1", "--fault-kinds", "cut") as proc:
        raw, how = _raw_stream(proc.port, BODY, timeout=10)
        assert how == "closed" and b"data: [DONE]" not in raw and not raw.endswith(b"0\r\n\r\n")
        assert 1 <= raw.count(b'"text"') < 40
        # the non-streamed form is closed without a response
        with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
            post(proc.port, "/v1/completions", {k: v for k, v in BODY.items() if k != "stream"})


def test_junk_inserts_one_malformed_data_line_and_finishes():
    with running_sim("--time-scale", "20", "--fault-rate", "1", "--fault-kinds", "junk") as proc:
        raw, how = _raw_stream(proc.port, BODY, timeout=10)
    assert how == "complete" and b"data: [DONE]" in raw
    bad = []
    for line in raw.split(b"\n"):
        if line.startswith(b"data: ") and line != b"data: [DONE]":
            try:
                json.loads(line[6:])
            except ValueError:
                bad.append(line)
    assert len(bad) == 1
    assert raw.count(b'"finish_reason"') == 40  # every real token still arrives


def test_hang_stops_sending_but_keeps_the_connection():
    with running_sim("--time-scale", "20", "--fault-rate", "1", "--fault-kinds", "hang") as proc:
        raw, how = _raw_stream(proc.port, BODY, timeout=1.5)
        assert how == "timeout" and b"[DONE]" not in raw and 1 <= raw.count(b'"text"') < 40
        # the engine dropped the hung request: nothing is left running
        from tests.server.sim.helpers import get, metric_value
        text = get(proc.port, "/metrics")[1].decode()
        assert metric_value(text, "vllm:num_requests_running") == 0
        assert metric_value(text, "vllm:request_success_total", {"finished_reason": "abort"}) == 1


def test_partial_fault_rate_fails_some_and_serves_the_rest():
    with running_sim("--time-scale", "20", "--fault-rate", "0.5", "--fault-kinds", "500", "--seed", "7") as proc:
        codes = [post(proc.port, "/v1/completions", {"prompt": "x", "max_tokens": 2})[0] for _ in range(40)]
    assert set(codes) == {200, 500} and 8 <= codes.count(500) <= 32
