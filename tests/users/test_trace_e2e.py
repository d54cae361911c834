"""Trace replay end to end (``--trace``): real ``locust`` processes against the simulator, which caches full KV
blocks and exports vLLM's prefix-cache counters. The test writes its own traces in the Mooncake form.

1. Every trace line is sent once, at the trace's own time (``--trace-speedup 2``: the scheduled send times are
   the trace's offsets halved), with its input_length as the server counts it and its output_length; a burst
   larger than the user pool is sent late and its lateness is client queue time.
2. Lines whose hash_ids share their first two blocks hit the server's prefix cache (hit rate > 0.5) and take the
   server less prefill time than the same lengths with all ids distinct (hit rate ~0).
3. Master + 2 workers share the lines: each sent once, none unsent.
4. A malformed line stops locust at start with ``file:line``.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest

from tests.server.sim.helpers import running_sim
from tests.support import LOCUST, ROOT, Proc, free_port
from tests.users.e2e import run_locust

MODEL = "deepseek-ai/DeepSeek-V2-Lite"
LINES = 30
BURST = 4
"""The last BURST lines share one timestamp: with 2 users, at least 2 of them wait in the client."""
SPEEDUP = 2.0


def write_trace(path, shared: bool) -> list[dict]:
    """LINES requests 200 ms apart on the trace's clock (100 ms at SPEEDUP), 1100-1303 tokens in (the last block
    partial), 8 out; ``shared``: all start with blocks 0 and 1, else every id is new."""
    rows, fresh = [], 100
    for i in range(LINES):
        n_in = 1100 + 7 * i
        blocks = -(-n_in // 512)
        ids = [0, 1] if shared else [fresh, fresh + 1]
        ids += list(range(fresh + 2, fresh + blocks))
        fresh += blocks
        rows.append({"timestamp": 200 * min(i, LINES - BURST), "input_length": n_in, "output_length": 8,
                     "hash_ids": ids})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return rows


def _replay(port: int, tmp_path, trace: str, *extra: str):
    run = run_locust(f"http://127.0.0.1:{port}", [
        "--server-metrics-url", f"http://127.0.0.1:{port}/metrics", "--server-metrics-interval", "0.5",
        "--trace", trace, "--trace-speedup", str(SPEEDUP), "--max-concurrency", "2", "--stop-timeout", "10",
        *extra, "StreamingChatUser"], tmp_path)
    assert run.rc == 0 and run.summary is not None, run.output[-3000:]
    return run


def _stage(summary: dict) -> dict:
    (stage,) = [st for st in summary["stages"] if not st["warmup"]]
    return stage


@pytest.mark.slow
def test_trace_lines_are_replayed_on_their_clock_and_shared_blocks_hit_the_prefix_cache(tmp_path):
    traces = {kind: tmp_path / f"{kind}.jsonl" for kind in ("shared", "distinct")}
    rows = {kind: write_trace(path, kind == "shared") for kind, path in traces.items()}
    # time scale 0.1: prefill of ~1200 tokens is ~80 ms, well above the client's noise on a busy box
    with running_sim("--time-scale", "0.1", "--served-model-name", MODEL, "--tokenizer", "deepseek-v2") as sim:
        runs = {kind: _replay(sim.port, tmp_path, str(path)) for kind, path in traces.items()}
    for kind, run in runs.items():
        s = run.summary
        assert s["requests"] == {**s["requests"], "total": LINES, "ok": LINES, "failed": 0}, s["requests"]
        assert s["tokens"]["prompt_mismatch_ratio"] == 0.0
        (loop,) = s["open_loop"]["stages"]
        assert (loop["trace_lines"], loop["scheduled"], loop["unsent"]) == (LINES, LINES, 0), loop
        assert s["open_loop"]["arrival"] == "trace" and loop["trace_speedup"] == SPEEDUP
        sent = [r for r in run.results if r["stage"] == "trace"]
        assert len(sent) == LINES == len(run.results)
        # each line once: the server's prompt count is the line's input_length, max_tokens its output_length
        assert Counter((r["prompt_tokens"], r["max_tokens"]) for r in sent) == Counter(
            (row["input_length"], row["output_length"]) for row in rows[kind])
        # the trace's own clock: scheduled send times are its offsets / speedup
        t0 = sorted(r["t0"] for r in sent)
        assert [t - t0[0] for t in t0] == pytest.approx(
            [row["timestamp"] / 1000 / SPEEDUP for row in rows[kind]], abs=1e-6)
        # the burst: 2 users, BURST lines at once -> the later ones wait for a user; that wait is client queue
        assert loop["late"] >= BURST - 2
        burst = sorted(r["e2e"] for r in sent if r["t0"] == t0[-1])
        assert len(burst) == BURST
        assert _stage(s)["client_queue_ms"]["max"] >= 0.99 * burst[0] * 1000
    shared, distinct = _stage(runs["shared"].summary), _stage(runs["distinct"].summary)
    assert shared["prefix_cache_hit_rate"] > 0.5, shared
    assert distinct["prefix_cache_hit_rate"] < 0.1, distinct
    # what the cache saves is prefill: the server's own prefill time (its histogram's exact mean over the run) is
    # lower for the shared lines. Not the client's TTFT p50, which counts from the trace's scheduled time and so
    # carries each run's client lateness: on a busy box (CI) one run's lateness alone put the shared p50 above
    prefill = {k: r.summary["attribution"]["decomposition"]["prefill_ms"] for k, r in runs.items()}
    assert prefill["shared"]["count"] == prefill["distinct"]["count"] == LINES, prefill
    assert prefill["shared"]["mean"] < prefill["distinct"]["mean"], prefill
    print(f"trace replay: {LINES} lines, {LINES} sent; prefix cache hit rate {shared['prefix_cache_hit_rate']:.3f} "
          f"shared vs {distinct['prefix_cache_hit_rate']:.3f} distinct; server prefill mean "
          f"{prefill['shared']['mean']:.1f} vs {prefill['distinct']['mean']:.1f} ms; client TTFT p50 "
          f"{shared['ttft_ms']['p50']:.1f} vs {distinct['ttft_ms']['p50']:.1f} ms; late "
          f"{runs['shared'].summary['open_loop']['stages'][0]['late']}, client queue max "
          f"{shared['client_queue_ms']['max']:.1f} ms")


@pytest.mark.slow
def test_workers_share_the_trace(tmp_path):
    trace = tmp_path / "shared.jsonl"
    write_trace(trace, shared=True)
    port, out = free_port(), tmp_path / "summary.json"
    common = ["-f", str(ROOT / "locustfile.py")]
    with running_sim("--served-model-name", MODEL, "--tokenizer", "deepseek-v2") as sim:
        workers = [Proc([LOCUST, *common, "--worker", "--master-host", "127.0.0.1", "--master-port", str(port),
                         "StreamingChatUser"], name=f"worker{i}") for i in range(2)]
        try:
            with Proc([LOCUST, *common, "--headless", "--master", "--master-bind-host", "127.0.0.1",
                       "--master-bind-port", str(port), "--expect-workers", "2", "--host",
                       f"http://127.0.0.1:{sim.port}", "--prometheus-port", "0", "--server-metrics-url",
                       f"http://127.0.0.1:{sim.port}/metrics", "--server-metrics-interval", "0.5", "--trace",
                       str(trace), "--trace-speedup", str(SPEEDUP), "--max-concurrency", "4", "--stop-timeout", "10",
                       "--llm-summary-json", str(out), "StreamingChatUser"], name="master") as master:
                assert master.wait(90) == 0, master.output()[-3000:]
        finally:
            for w in workers:
                w.stop()
    s = json.loads(out.read_text())
    assert s["workers"] == 2
    (loop,) = s["open_loop"]["stages"]
    assert (loop["trace_lines"], loop["scheduled"], loop["unsent"]) == (LINES, LINES, 0), loop
    assert s["requests"]["total"] == s["requests"]["ok"] == LINES
    assert _stage(s)["prefix_cache_hit_rate"] > 0.5


@pytest.mark.slow
def test_a_malformed_line_stops_locust_at_start_naming_file_and_line(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"timestamp": 0, "input_length": 600, "output_length": 8, "hash_ids": [1, 2]}\n\n'
                   '{"timestamp": 10, "input_length": "600", "output_length": 8}\n')
    with Proc([LOCUST, "-f", str(ROOT / "locustfile.py"), "--headless", "--host", "http://127.0.0.1:9",
               "--trace", str(bad), "StreamingChatUser"], name="locust") as proc:
        assert proc.wait(60) == 2
        out = proc.output()
    assert f"{bad}:3: input_length must be an integer >= 1, got '600'" in out, out[-2000:]
    assert "Traceback" not in out
