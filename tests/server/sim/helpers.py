"""Helpers for the simulator's integration tests: start it, post JSON, read SSE events exactly as sent."""

from __future__ import annotations

import http.client
import json
from contextlib import contextmanager

from tests.support import PY, Proc, free_port, wait_http


@contextmanager
def running_sim(*flags: str, profile: str = "cpu-tiny"):
    port = free_port()
    with Proc([PY, "-m", "server.sim", "--port", str(port), "--profile", profile, *flags], name="sim") as proc:
        wait_http(f"http://127.0.0.1:{port}/health", timeout=60, proc=proc)
        proc.port = port
        yield proc


def post(port: int, path: str, body: dict | bytes, timeout: float = 30.0) -> tuple[int, dict, bytes]:
    """POST and read the whole response: (status, lower-cased headers, raw body)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    conn.request("POST", path, body=data, headers={"content-type": "application/json"})
    resp = conn.getresponse()
    raw = resp.read()
    headers = {k.lower(): v for k, v in resp.getheaders()}
    conn.close()
    return resp.status, headers, raw


def get(port: int, path: str) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", path)
    resp = conn.getresponse()
    raw = resp.read()
    conn.close()
    return resp.status, raw


def sse_events(raw: bytes) -> list[bytes]:
    """The payloads of ``data: ...`` events; asserts the vLLM framing (every event ends in a blank line)."""
    text = raw.decode()
    assert text.endswith("\n\n"), text[-200:]
    events = text[:-2].split("\n\n")
    out = []
    for ev in events:
        assert ev.startswith("data: ") and "\n" not in ev, repr(ev)
        out.append(ev[6:].encode())
    return out


def stream(port: int, path: str, body: dict) -> tuple[list[dict], bool]:
    """Stream a request; returns (parsed JSON events, whether it ended with [DONE])."""
    status, headers, raw = post(port, path, {**body, "stream": True})
    assert status == 200, raw
    assert headers["content-type"].startswith("text/event-stream")
    payloads = sse_events(raw)
    done = payloads[-1] == b"[DONE]"
    return [json.loads(p) for p in (payloads[:-1] if done else payloads)], done


def metric_value(text: str, name: str, labels: dict | None = None) -> float:
    from prometheus_client.parser import text_string_to_metric_families

    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in (labels or {}).items()):
                return s.value
    raise KeyError(name)
