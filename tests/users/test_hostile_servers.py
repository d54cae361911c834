"""Hostile servers against a real ``locust`` run: every request is counted once under its kind,
the run goes on, nothing is lost, no traceback.

The server (tests/users/hostile_server.py, its own process) answers the LLM requests in turn with each
hostile behaviour and counts what it served; the client's rows must match it kind by kind.
"""

from __future__ import annotations

import json
import signal
import time
import urllib.request
from collections import Counter

import pytest

from tests.support import LOCUST, PY, Proc, free_port, wait_http, wait_until
from tests.users.e2e import run_locust

pytestmark = pytest.mark.slow

KIND_OF_MODE = {
    "ok": None,
    "close": None,  # Connection: close after every response: reconnects, all ok
    "silence": "timeout",  # headers, then nothing
    "never": "timeout",  # accepts, never answers
    "huge_line": "bad_chunk",  # one 4 MiB SSE line
    "bad_utf8": "bad_chunk",
    "html": "bad_chunk",  # a 200 text/html page for a stream
    "chunked_garbage": "stream_cut",
    "redirect": "http_3xx",
}
RUN = ["-u", "9", "-r", "9", "-t", "6s", "--stop-timeout", "5", "--request-timeout", "1", "--input-len", "16",
       "--output-len", "8", "StreamingChatUser"]


def _server(port: int, modes: str) -> Proc:
    proc = Proc([PY, "-m", "tests.users.hostile_server", "--port", str(port), "--modes", modes], name="hostile")
    wait_http(f"http://127.0.0.1:{port}/health", proc=proc)
    return proc


def _stats(host: str) -> dict:
    with urllib.request.urlopen(f"{host}/stats", timeout=5) as r:
        return json.loads(r.read())


def _clean(run) -> None:
    assert "Traceback" not in run.output, run.output[-4000:]
    assert run.results and all(r["has_result"] for r in run.results)


def test_each_hostile_server_counted_once_under_its_kind(tmp_path) -> None:
    port = free_port()
    host = f"http://127.0.0.1:{port}"
    with _server(port, ",".join(KIND_OF_MODE)):
        run = run_locust(host, RUN, tmp_path)
        served = _stats(host)
    _clean(run)
    rows = run.results
    assert len(rows) == served["requests"], (len(rows), served)  # nothing lost, nothing counted twice
    want: Counter = Counter()
    for mode, kind in KIND_OF_MODE.items():
        n = served.get(f"mode_{mode}", 0)
        assert n >= 1, f"{mode} never served: {served}"
        want[kind or "ok"] += n
    got = Counter("ok" if r["ok"] else r["kind"] for r in rows)
    assert got == want, (got, want)
    messages = [r["exception"] for r in rows if r["exception"]]
    for start in ("bad_chunk: an SSE event over 1 MiB without its end: data: {",
                  "bad_chunk: not JSON: {",  # the invalid UTF-8
                  "bad_chunk: not an event stream (Content-Type: text/html): <html><body>502 Bad Gateway",
                  "http_3xx: HTTP 307 to http://elsewhere.invalid/v1/chat/completions: moved",
                  "stream_cut: HTTPParseError after ", "timeout: no byte for the request timeout after 0"):
        assert any(m.startswith(start) for m in messages), (start, set(messages))
    summary = run.summary
    assert summary is not None and {k: v for k, v in summary["requests"]["errors"].items() if v} == {
        k: n for k, n in want.items() if k != "ok"
    }, summary["requests"]


def test_server_restarted_mid_run_connection_refused_then_back(tmp_path) -> None:
    port = free_port()
    host = f"http://127.0.0.1:{port}"
    # -t only caps it: the run is ended (SIGTERM: Locust's graceful quit, as at -t) once the second server has
    # served 8 requests, however long a loaded box takes to get there
    args = ["-u", "4", "-r", "4", "-t", "60s", "--stop-timeout", "3", "--request-timeout", "1", "--input-len", "16",
            "--output-len", "8", "StreamingChatUser"]
    first = _server(port, "ok")
    locust = None
    try:
        tag = free_port()
        results, summary = tmp_path / f"r-{tag}.jsonl", tmp_path / f"s-{tag}.json"
        locust = Proc([LOCUST, "-f", "tests/users/results_locustfile.py", "--headless", "--host", host,
                       "--only-summary", "--prometheus-port", "0", "--server-metrics-url", "off",
                       "--llm-summary-json", str(summary), *args],
                      name="locust", env={"LLM_TEST_RESULTS": str(results)})
        deadline = time.monotonic() + 60
        while (before := _stats(host)["requests"]) < 4 and time.monotonic() < deadline:  # the run is going
            time.sleep(0.1)
        first.signal(signal.SIGKILL)
        first.popen.wait(5)
        time.sleep(1.5)  # the scenario: down for 1.5 s (above the 1 s request timeout), every request refused
        second = _server(port, "ok")
        with second:
            wait_until(lambda: _stats(host)["requests"] >= 8, timeout=40, interval=0.2)
            locust.signal(signal.SIGTERM)
            rc = locust.wait(40)
            after = _stats(host)["requests"]
        out = locust.output()
    finally:
        first.stop()
        if locust is not None:
            locust.stop()
    assert rc in (0, 1), out[-3000:]
    assert "Traceback" not in out, out[-4000:]
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    assert all(r["has_result"] for r in rows)
    kinds = Counter("ok" if r["ok"] else r["kind"] for r in rows)
    assert kinds["connection"] >= 1 and set(kinds) <= {"ok", "connection", "stream_cut"}, kinds
    # the run went on: requests served by the restarted server, all ok
    ok_after = [r for r in rows if r["ok"]][-1]
    # every request the second server served is ok; the first one's too, but for the (at most one per user)
    # requests it held when it was killed: those failed as connection or stream_cut, never vanished
    assert after >= 5 and kinds["ok"] >= before + after - 4, (kinds, before, after)
    assert ok_after["kind"] is None
    s = json.loads(summary.read_text())
    assert {k: v for k, v in s["requests"]["errors"].items() if v} == {k: n for k, n in kinds.items() if k != "ok"}


def test_master_sigkilled_mid_run_worker_exits_by_itself(tmp_path) -> None:
    # Locust's worker quits when no heartbeat came from its master for MASTER_HEARTBEAT_TIMEOUT (60 s; 3 s in
    # this test's locustfile): nothing of ours (the stall watch, telemetry's greenlets) may keep it alive
    port, mport = free_port(), free_port()
    host = f"http://127.0.0.1:{port}"
    locustfile = "tests/users/short_heartbeat_locustfile.py"
    rows = tmp_path / "w.jsonl"
    with _server(port, "ok"):
        master = Proc([LOCUST, "-f", locustfile, "--headless", "--master", "--master-bind-host", "127.0.0.1",
                       "--master-bind-port", str(mport), "--expect-workers", "1", "-u", "3", "-r", "3", "-t", "180s",
                       "--host", host, "--prometheus-port", "0", "--server-metrics-url", "off", "--input-len", "16",
                       "--output-len", "8", "StreamingChatUser"],
                      name="master", env={"LLM_TEST_RESULTS": str(tmp_path / "m.jsonl")})
        worker = Proc([LOCUST, "-f", locustfile, "--worker", "--master-host", "127.0.0.1", "--master-port", str(mport)],
                      name="worker", env={"LLM_TEST_RESULTS": str(rows)})
        with master, worker:
            deadline = time.monotonic() + 120
            while not (rows.exists() and rows.stat().st_size) and time.monotonic() < deadline:  # the run is on
                time.sleep(0.2)
            master.signal(signal.SIGKILL)
            killed = time.monotonic()
            rc = worker.wait(20)
            took = time.monotonic() - killed
            out = worker.output()
    assert master.popen.returncode == -signal.SIGKILL
    assert "Didn't get heartbeat from master in over 3s" in out, out[-3000:]
    assert 2.0 <= took < 12.0, (took, out[-2000:])  # the last heartbeat came up to 1 s before the kill
    assert "Traceback" not in out, out[-4000:]
    assert rc == 0, (rc, out[-2000:])
    assert rows.read_text().count("\n") > 0
