"""One real Locust master, many workers over Locust's real RPC: what does merging their reports cost the master?

For each worker count, a real ``locust --master --headless --expect-workers N`` (the project's locustfile plus two
probes, ``bench/master_locustfile.py``) and one process of lightweight workers: N greenlets, each with its own
Locust RPC connection (``locust.rpc``, zmq), speaking the worker protocol (``client_ready``, heartbeats, ``spawning``
/ ``spawning_complete``, a ``stats`` report every second, the final report and ``quit``). Each worker records
``--rps`` synthetic streamed requests a second (``--tokens`` chunks each, TTFT and gaps drawn around 100 / 20 ms)
into a real telemetry recorder and Locust's request stats, and ships exactly what a worker ships: Locust's stats,
``recorder.take()`` (sketches, histograms, per-second slots) under ``llm``, and the client-load probe's samples.

Printed per worker count, over a window in the middle of the run: the reports the master handled per second (the
workers' process shares the machine: below one per worker a second, it was the limit), the master's CPU (cores, and
ms per report), the time its listeners take per report (Locust's stats merge + the telemetry merge: p50 / p99), its
RSS, the report lag (seconds from the worker's send to the master's handling: p50 / p99, first vs last third of the
window: a lag that grows means the master falls behind) and the check that the merged summary equals the sum of what
the workers shipped (requests, output tokens).

    python -m bench.master_fanin                         # 50, 100, 200 workers, 20 s each
    python -m bench.master_fanin --workers 10 --seconds 5 --json      # the suite's quick variant

Exits nonzero when the merged summary differs from what the workers shipped, never on a figure.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.client_cost import LOCUST, PY, QUIET, ROOT, _cpu_s, _free_port, _median, loadavg, wait_up
from workload.argtypes import positive_int, seconds


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024.0
    return 0.0


def _q(xs: list[float], q: float) -> float | None:
    if not xs:
        return None
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


# ---- the lightweight workers (run in their own process: python -m bench.master_fanin --serve ...) --------------

def serve(workers: int, port: int, rps: int, tokens: int, out: Path) -> None:
    """N workers in this process until the master quits them; writes what each shipped to ``out``."""
    from gevent import monkey

    monkey.patch_all()
    import gevent
    import numpy as np
    from locust import __version__
    from locust.rpc import Message, rpc
    from locust.stats import RequestStats

    from telemetry.control.client_load import REPORT_KEY as LOAD_KEY
    from telemetry.measure.recorder import Recorder
    from telemetry.plugin import REPORT_KEY
    from users.result import GenerationResult, RequestMeta

    shipped = {"requests": 0, "output_tokens": 0, "reports": 0}
    done = gevent.event.Event()
    left = [workers]

    def worker(i: int) -> None:
        wid = f"bench-worker-{i}"
        client = rpc.Client("127.0.0.1", port, wid)
        rng = np.random.default_rng(i)
        rec, stats = Recorder(), RequestStats()
        meta = RequestMeta(stage="main", max_tokens=tokens, user_class="StreamingChatUser",
                           name="POST /v1/chat/completions [stream]")
        running = gevent.event.Event()
        users = {"n": 0}

        def record(n: int) -> None:
            now = time.perf_counter()
            for _ in range(n):
                t0 = now - 0.1 - tokens * 0.02
                gaps = rng.gamma(4.0, 0.005, tokens)
                times = t0 + rng.gamma(4.0, 0.025) + np.cumsum(gaps) - gaps[0]
                r = GenerationResult(meta=meta, ok=True, error_kind=None, error_message=None, t0=t0, t_sent=t0,
                                     t_end=float(times[-1]), chunk_times=times,
                                     chunk_tokens=np.ones(tokens, dtype=np.int64), output_tokens=tokens,
                                     prompt_tokens=32, prompt_tokens_client=32, wall_start=time.time())
                rec.record(r)
                stats.log_request("POST", meta.name, (r.t_end - t0) * 1000.0, tokens)
                shipped["requests"] += 1
                shipped["output_tokens"] += tokens

        def report() -> None:
            data = {"stats": stats.serialize_stats(), "stats_total": stats.total.get_stripped_report(),
                    "errors": stats.serialize_errors(), "user_count": users["n"],
                    "user_classes_count": {"StreamingChatUser": users["n"]}}
            stats.errors = {}
            state = rec.take()
            state["model"] = "bench"
            data[REPORT_KEY] = state
            data[LOAD_KEY] = {"lag_ms": [0.2] * 20, "cpu_s": 0.3, "wall_s": 1.0}
            data["bench_sent"] = time.time()
            client.send(Message("stats", data, wid))
            shipped["reports"] += 1

        def reporter() -> None:
            gevent.sleep((i % 100) / 100.0)  # spread the workers over the second, as independent processes are
            while True:
                if running.is_set():
                    record(rps)
                report()
                client.send(Message("heartbeat", {"state": "running" if running.is_set() else "ready",
                                                  "current_cpu_usage": 30.0, "current_memory_usage": 100e6}, wid))
                gevent.sleep(1.0)

        client.send(Message("client_ready", __version__, wid))
        rep = None
        try:
            while True:
                msg = client.recv()
                if msg.type == "ack" and rep is None:
                    rep = gevent.spawn(reporter)
                elif msg.type == "spawn":
                    client.send(Message("spawning", None, wid))
                    users["n"] = sum(msg.data["user_classes_count"].values())
                    running.set()
                    client.send(Message("spawning_complete", {"user_classes_count": msg.data["user_classes_count"],
                                                              "user_count": users["n"]}, wid))
                elif msg.type == "stop":
                    running.clear()
                    client.send(Message("client_stopped", None, wid))
                elif msg.type == "quit":
                    running.clear()
                    if rep is not None:
                        rep.kill()
                    report()  # the final report, then quit: what a worker does
                    client.send(Message("quit", None, wid))
                    gevent.sleep(0.5)
                    return
        finally:
            client.close()
            left[0] -= 1
            if not left[0]:
                done.set()

    for i in range(workers):
        gevent.spawn(worker, i)
    done.wait()
    out.write_text(json.dumps(shipped))


# ---- the benchmark ---------------------------------------------------------------------------------------------

def measure(n: int, secs: float, rps: int, tokens: int, host: str) -> dict:
    mport = _free_port()
    with tempfile.TemporaryDirectory() as tmp:
        summary, probes, shipped = Path(tmp) / "summary.json", Path(tmp) / "probes.json", Path(tmp) / "shipped.json"
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "HF_HUB_OFFLINE": "1", "BENCH_MASTER_OUT": str(probes)}
        master = subprocess.Popen(
            [LOCUST, "-f", "bench/master_locustfile.py", *QUIET, "--master", "--headless", "--expect-workers", str(n),
             "-u", str(n), "-r", str(n), "-t", f"{int(secs)}s", "--master-bind-host", "127.0.0.1",
             "--master-bind-port", str(mport), "--host", host, "--only-summary", "--model", "bench",
             "--input-len", "fixed:32", "--output-len", f"fixed:{tokens}", "--loglevel", "WARNING",
             "--llm-summary-json", str(summary), "StreamingChatUser"],
            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
        time.sleep(1.0)
        fleet = subprocess.Popen([PY, "-m", "bench.master_fanin", "--serve", str(n), "--master-port", str(mport),
                                  "--rps", str(rps), "--tokens", str(tokens), "--shipped", str(shipped)],
                                 cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            # the window: the middle of the run (workers connected and spawned; before the quit)
            time.sleep(min(4.0, secs / 4) + 2.0)
            c0, w0, t0 = _cpu_s(master.pid), time.monotonic(), time.time()  # wall: the probes' clock
            time.sleep(max(secs / 2, 1.0))
            c1, w1, t1 = _cpu_s(master.pid), time.monotonic(), time.time()
            rss, la = _rss_mb(master.pid), loadavg()
            master.wait(secs + 120)
            fleet.wait(60)
        except (subprocess.TimeoutExpired, ProcessLookupError, FileNotFoundError):
            for p in (master, fleet):
                if p.poll() is None:
                    os.killpg(p.pid, signal.SIGKILL) if p is master else p.kill()
            raise SystemExit(f"{n} workers: the run did not end: {master.stderr.read().decode()[-2000:]}") from None
        if not summary.exists() or not shipped.exists():
            raise SystemExit(f"{n} workers: no summary or no shipped record: "
                             f"{master.stderr.read().decode()[-1500:]} {fleet.stderr.read().decode()[-1500:]}")
        s, sent = json.loads(summary.read_text()), json.loads(shipped.read_text())
        pr = json.loads(probes.read_text()) if probes.exists() else {"lags": [], "merges": []}
    window = [(t, lag) for t, lag in pr["lags"] if t0 <= t <= t1]  # reports the master handled in the window
    reports = max(len(window), 1)
    lags = [lag for _t, lag in window]
    third = max(len(window) // 3, 1)
    return {
        "workers": n, "master_cores": (c1 - c0) / (w1 - w0), "master_ms_per_report": (c1 - c0) / reports * 1000.0,
        "reports_per_s": len(window) / (w1 - w0),
        "merge_ms_p50": (_q(pr["merges"], 0.5) or 0) * 1000.0, "merge_ms_p99": (_q(pr["merges"], 0.99) or 0) * 1000.0,
        "rss_mb": rss, "lag_ms_p50": (_q(lags, 0.5) or 0) * 1000.0, "lag_ms_p99": (_q(lags, 0.99) or 0) * 1000.0,
        "lag_ms_p50_first_third": (_q([x for _t, x in window[:third]], 0.5) or 0) * 1000.0,
        "lag_ms_p50_last_third": (_q([x for _t, x in window[-third:]], 0.5) or 0) * 1000.0,
        "reports_handled": len(pr["lags"]), "reports_shipped": sent["reports"],
        "requests_merged": s["requests"]["ok"], "requests_shipped": sent["requests"],
        "tokens_merged": s["tokens"]["output"]["total"] if isinstance(s["tokens"]["output"], dict)
        else s["tokens"]["output"],
        "tokens_shipped": sent["output_tokens"], "workers_in_summary": s.get("workers"), "loadavg": la,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.master_fanin", description=__doc__.split("\n")[0])
    p.add_argument("--workers", default="50,100,200", help="comma list of worker counts")
    p.add_argument("--seconds", type=seconds, default=20.0, help="each run's -t")
    p.add_argument("--rps", type=positive_int, default=2, help="synthetic requests per worker per second")
    p.add_argument("--tokens", type=positive_int, default=200, help="chunks per synthetic request")
    p.add_argument("--json", action="store_true")
    p.add_argument("--serve", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--master-port", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--shipped", type=Path, default=None, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.serve:
        serve(a.serve, a.master_port, a.rps, a.tokens, a.shipped)
        return 0
    port = _free_port()
    server = subprocess.Popen([PY, "-m", "server.scripted", "--port", str(port), "--tokenizer", "none"], cwd=ROOT,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rows, bad = [], []
    try:
        wait_up(f"http://127.0.0.1:{port}")
        for n in [int(x) for x in a.workers.split(",")]:
            r = measure(n, a.seconds, a.rps, a.tokens, f"http://127.0.0.1:{port}")
            rows.append(r)
            equal = r["requests_merged"] == r["requests_shipped"] and r["tokens_merged"] == r["tokens_shipped"]
            if not equal:
                bad.append(n)
            if not a.json:
                print(f"{n:>4} workers: {r['reports_per_s']:.0f} reports/s | master {r['master_cores']:.2f} cores "
                      f"({r['master_ms_per_report']:.2f} ms CPU per report) | its listeners per report p50 "
                      f"{r['merge_ms_p50']:.2f} ms, p99 "
                      f"{r['merge_ms_p99']:.2f} | RSS {r['rss_mb']:.0f} MB | report lag p50 {r['lag_ms_p50']:.1f} ms, "
                      f"p99 {r['lag_ms_p99']:.1f} (first third {r['lag_ms_p50_first_third']:.1f}, last third "
                      f"{r['lag_ms_p50_last_third']:.1f}) | merged {r['requests_merged']:,} requests / "
                      f"{r['tokens_merged']:,} tokens of {r['requests_shipped']:,} / {r['tokens_shipped']:,} shipped "
                      f"({'equal' if equal else 'DIFFERENT'}) | load avg {r['loadavg']:.1f}", flush=True)
    finally:
        server.terminate()
        server.wait(10)
    if a.json:
        print(json.dumps({"rps_per_worker": a.rps, "tokens": a.tokens, "rows": rows,
                          "master_cores_median": _median([r["master_cores"] for r in rows])}, indent=1))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
