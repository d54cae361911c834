"""End to end: every fault of issue 2 is counted once under its kind, the run goes on, nothing is lost.

The scripted server rotates 500, 429, cut, junk, stall and nodone over every 3rd request and counts
what it served; with ``--stop-timeout`` longer than ``--request-timeout`` every request ends inside
the run, so the client's ok + failed must equal the requests the server received.
"""

from __future__ import annotations

from collections import Counter

import pytest

from tests.users.e2e import run_locust, scripted

pytestmark = pytest.mark.slow

KIND_OF_FAULT = {
    "500": "http_5xx",
    "429": "http_429",
    "cut": "stream_cut",
    "junk": "bad_chunk",
    "stall": "timeout",
    "nodone": "stream_cut",
}


def test_each_fault_counted_once_under_its_kind(tmp_path) -> None:
    faults = ",".join(KIND_OF_FAULT)
    with scripted(
        "--ttft-ms",
        "20",
        "--itl-ms",
        "5",
        "--output-tokens",
        "12",
        "--fault",
        faults,
        "--fault-every",
        "3",
        "--stall-s",
        "20",
    ) as (host, stats):
        run = run_locust(
            host,
            [
                "-u",
                "6",
                "-r",
                "6",
                "-t",
                "6s",
                "--stop-timeout",
                "8",
                "--request-timeout",
                "1.5",
                "--input-len",
                "16",
                "StreamingChatUser",
                "StreamingCompletionUser",
            ],
            tmp_path,
        )
        served = stats()
    assert "Traceback" not in run.output, run.output[-4000:]
    rows = run.results
    assert all(r["has_result"] for r in rows)
    ok = [r for r in rows if r["ok"]]
    failed = Counter(r["kind"] for r in rows if not r["ok"])
    assert len(ok) + sum(failed.values()) == served["requests"], (len(ok), failed, served)

    want: Counter = Counter()
    for fault, kind in KIND_OF_FAULT.items():
        n = served.get(f"fault_{fault}", 0)
        assert n >= 1, f"fault {fault} never served: run too short ({served})"
        want[kind] += n
    assert failed == want, (failed, want)
    summary = run.summary  # telemetry's summary counts the same, by kind
    assert summary is not None
    assert (
        summary["requests"]["total"] == served["requests"] == summary["requests"]["ok"] + summary["requests"]["failed"]
    )
    assert {k: v for k, v in summary["requests"]["errors"].items() if v} == dict(want)
    assert len(ok) == served["requests"] - sum(want.values()) > 0
    # failures carry "<kind>: <detail>", quoting the server's body for HTTP errors
    for r in rows:
        if not r["ok"]:
            assert r["exception"].startswith(f"{r['kind']}: ")
    e500 = next(r["exception"] for r in rows if r["kind"] == "http_5xx")
    assert "HTTP 500" in e500 and "scripted fault 500" in e500
    assert "scripted fault 429" in next(r["exception"] for r in rows if r["kind"] == "http_429")
    # Locust's own table lists them by message, and the process does not crash
    assert run.rc in (0, 1), run.output[-3000:]
    assert "http_5xx: HTTP 500" in run.output


def test_bad_option_value_stops_at_start_with_the_accepted_forms(tmp_path) -> None:
    run = run_locust("http://127.0.0.1:9", ["-u", "1", "-t", "1s", "--input-len", "foo:1"], tmp_path, timeout=60)
    assert run.rc == 2
    assert "--input-len" in run.output and "fixed:N" in run.output and "zipf:ALPHA:LO:HI" in run.output
    assert "Traceback" not in run.output
    run = run_locust("http://127.0.0.1:9", ["-u", "1", "-t", "1s", "--request-timeout", "soon"], tmp_path, timeout=60)
    assert run.rc == 2 and "--request-timeout" in run.output and "Traceback" not in run.output


def test_unreachable_server_stops_the_run_at_start_and_says_so(tmp_path) -> None:
    run = run_locust(
        "http://127.0.0.1:9",
        ["-u", "2", "-r", "2", "-t", "2s", "--input-len", "8", "StreamingChatUser"],
        tmp_path,
        timeout=60,
    )
    assert "Traceback" not in run.output
    assert run.rc == 2 and "http://127.0.0.1:9: cannot connect" in run.output  # one line, nothing sent
    assert not run.results
