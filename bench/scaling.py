"""Client throughput per Locust process: ``--processes 1`` vs ``--processes 2`` against a server that is not the limit.

The server is the scripted server with ``--ttft-ms 0 --itl-ms 0``: each streamed answer is rendered once and then
written whole (server.scripted's burst mode), so a request costs the server one parse and one write whatever its
length, and every worker is busy all the time reading, framing, parsing and recording its streams: the client
is the limit by construction. Each round runs both configurations one after the other (same users per process,
same request) and reads, after a warm-up, two instants a window apart: the tokens the server sent (``/stats``)
and the CPU time of every process (/proc/PID/stat: the master, each forked worker, the server).

Printed per configuration (medians of the rounds): output tokens/s in all and per worker process, each worker's
CPU (cores), the master's and the server's CPU, and the ratio tokens/s(2) / tokens/s(1) per round. The server is
not the limit when it uses well under one core (it is one process) and the workers together use what the machine
has left: ``cores - server - master``; on a 2-core machine that leftover, not the client, caps the ratio.

    python -m bench.scaling                       # 3 rounds, 32 users per process, 256-token answers
    python -m bench.scaling --rounds 5 --window 10 --json

Exits nonzero only on errors (a run that fails requests, streams nothing or exits badly), never on a figure.
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

from bench.client_cost import _TICK, LOCUST, PY, QUIET, ROOT, _cpu_s, _free_port, _median, _stats, wait_up
from workload.argtypes import non_negative_seconds, positive_int, seconds

TARGET = 1.8
"""Tokens/s of 2 processes over 1 process where the server is not the limit."""


def _busy_s() -> float:
    """CPU seconds the whole machine has been busy (/proc/stat: all but idle and iowait), every core together."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / _TICK


def _children(pid: int) -> list[int]:
    """The processes ``locust --processes N`` forked (its workers)."""
    try:
        return [int(x) for x in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def locust_argv(host: str, processes: int, users: int, tokens: int, summary: Path) -> list[str]:
    mport = str(_free_port())  # the master's own port: Locust's default 5557 on every interface clashes with other runs
    return [
        LOCUST, "-f", "locustfile.py", *QUIET, "--headless", "--processes", str(processes), "--host", host,
        "--master-bind-host", "127.0.0.1", "--master-bind-port", mport, "--master-host", "127.0.0.1",
        "--master-port", mport,
        "-u", str(users), "-r", str(users), "-t", "10m", "--only-summary", "--input-len", "fixed:32",
        "--output-len", f"fixed:{tokens}", "--model", "scaling", "--loglevel", "WARNING", "--stop-timeout", "5",
        "--llm-summary-json", str(summary), "StreamingChatUser",
    ]


def measure(host: str, server_pid: int, processes: int, users_per_process: int, tokens: int, warmup: float,
            window: float) -> dict:
    """One configuration: tokens/s and the CPU of every process over one window after the warm-up."""
    with tempfile.TemporaryDirectory() as tmp:
        summary = Path(tmp) / "summary.json"
        argv = locust_argv(host, processes, users_per_process * processes, tokens, summary)
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
        master = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                  start_new_session=True)
        try:
            deadline = time.monotonic() + 180  # a loaded box (the test suite) starts two workers slowly
            base = _stats(host).get("tokens_sent:scaling", 0)
            while _stats(host).get("tokens_sent:scaling", 0) == base or len(_children(master.pid)) < processes:
                if master.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"--processes {processes}: no tokens streamed: {_stderr(master)}")
                time.sleep(0.2)
            time.sleep(warmup)
            workers = _children(master.pid)
            pids = {"master": master.pid, "server": server_pid, **{f"worker{i}": p for i, p in enumerate(workers)}}
            s0, c0, t0, b0 = _stats(host), {k: _cpu_s(p) for k, p in pids.items()}, time.monotonic(), _busy_s()
            time.sleep(window)
            s1, c1, t1, b1 = _stats(host), {k: _cpu_s(p) for k, p in pids.items()}, time.monotonic(), _busy_s()
        except (FileNotFoundError, ProcessLookupError):
            raise SystemExit(f"--processes {processes}: a process ended early: {_stderr(master)}") from None
        finally:
            if master.poll() is None:
                os.killpg(master.pid, signal.SIGTERM)  # the master stops its workers and writes the summary
            try:
                master.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(master.pid, signal.SIGKILL)
                master.wait(10)
        if not summary.exists():
            raise SystemExit(f"--processes {processes}: no summary written: {_stderr(master)}")
        s = json.loads(summary.read_text())
    if s["requests"]["failed"]:
        raise SystemExit(f"--processes {processes}: {s['requests']['failed']} requests failed: {s['requests']}")
    dt = t1 - t0
    tps = (s1.get("tokens_sent:scaling", 0) - s0.get("tokens_sent:scaling", 0)) / dt
    if tps <= 0:
        raise SystemExit(f"--processes {processes}: no tokens in the window")
    cores = {k: (c1[k] - c0[k]) / dt for k in pids}
    return {
        "tokens_per_s": tps,
        "tokens_per_s_per_process": tps / processes,
        "worker_cores": [cores[k] for k in pids if k.startswith("worker")],
        "master_cores": cores["master"],
        "server_cores": cores["server"],
        "other_cores": max(0.0, (b1 - b0) / dt - sum(cores.values())),
        "us_per_token": sum(cores[k] for k in pids if k.startswith("worker")) / tps * 1e6,
    }


def _stderr(p: subprocess.Popen) -> str:
    if p.poll() is None:
        return "(still running)"
    return (p.stderr.read() if p.stderr else b"").decode(errors="replace")[-2000:]


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.scaling", description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=positive_int, default=3, help="rounds of (1 process, 2 processes); medians")
    p.add_argument("--users", type=positive_int, default=32, help="streams per worker process")
    p.add_argument("--tokens", type=positive_int, default=256, help="output tokens per request")
    p.add_argument("--warmup", type=non_negative_seconds, default=3.0, help="seconds of streaming before the window")
    p.add_argument("--window", type=seconds, default=8.0, help="seconds between the two readings")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    args = p.parse_args(argv)
    port = _free_port()
    server = subprocess.Popen(
        [PY, "-m", "server.scripted", "--port", str(port), "--ttft-ms", "0", "--itl-ms", "0", "--tokenizer", "none",
         "--selector", "epoll"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    host = f"http://127.0.0.1:{port}"
    rounds: list[dict] = []
    try:
        wait_up(host)
        for r in range(args.rounds):
            row = {n: measure(host, server.pid, n, args.users, args.tokens, args.warmup, args.window) for n in (1, 2)}
            row["ratio"] = row[2]["tokens_per_s"] / row[1]["tokens_per_s"]
            rounds.append(row)
            if not args.json:
                lines = " | ".join(_line(n, row[n]) for n in (1, 2))
                print(f"round {r + 1}: {lines} | ratio {row['ratio']:.2f}", flush=True)
    finally:
        server.terminate()
        server.wait(10)
    out = {
        "cores": os.cpu_count(),
        "users_per_process": args.users,
        "tokens_per_request": args.tokens,
        "window_s": args.window,
        "ratio": _median([r["ratio"] for r in rounds]),
        "rounds": [{str(k): v for k, v in r.items()} for r in rounds],
    }
    for n in (1, 2):
        out[f"processes_{n}"] = {
            k: _median([r[n][k] for r in rounds])
            for k in ("tokens_per_s", "tokens_per_s_per_process", "master_cores", "server_cores", "other_cores")
        }
        out[f"processes_{n}"]["us_per_token"] = _median([r[n]["us_per_token"] for r in rounds])
        out[f"processes_{n}"]["worker_cores"] = _median([sum(r[n]["worker_cores"]) for r in rounds])
    if args.json:
        print(json.dumps(out, indent=1))
        return
    one, two = out["processes_1"], out["processes_2"]
    left = (out["cores"] or 1) - two["server_cores"] - two["master_cores"] - two["other_cores"]
    print(
        f"medians of {args.rounds} rounds ({args.users} streams per process, {args.tokens}-token answers, "
        f"{args.window:g} s windows):\n"
        f"  1 process : {one['tokens_per_s']:,.0f} tokens/s ({one['worker_cores']:.2f} cores in the worker, "
        f"{one['us_per_token']:.1f} µs/token), server {one['server_cores']:.2f} cores, master "
        f"{one['master_cores']:.2f}\n"
        f"  2 processes: {two['tokens_per_s']:,.0f} tokens/s, {two['tokens_per_s_per_process']:,.0f} per process "
        f"({two['worker_cores']:.2f} cores in the workers, {two['us_per_token']:.1f} µs/token), server "
        f"{two['server_cores']:.2f} cores, master {two['master_cores']:.2f}\n"
        f"  ratio 2/1: {out['ratio']:.2f} (target {TARGET} where the server is not the limit); worker CPU per token "
        f"1 vs 2 processes: {one['us_per_token'] / two['us_per_token']:.2f} (1.00: a second process costs nothing "
        f"per token, the ratio is then the cores the workers got: {two['worker_cores']:.2f} vs "
        f"{one['worker_cores']:.2f});\n  the server used {two['server_cores']:.2f} of its one core, so it was not "
        f"the limit; other processes on this machine used {two['other_cores']:.2f} cores, which left the workers "
        f"{left:.2f} of the machine's {out['cores']}",
        flush=True,
    )


def _line(n: int, m: dict) -> str:
    workers = "+".join(f"{c:.2f}" for c in m["worker_cores"])
    return (f"{n} process{'es' if n > 1 else ''}: {m['tokens_per_s']:,.0f} tokens/s (workers {workers} cores, "
            f"server {m['server_cores']:.2f})")


if __name__ == "__main__":
    sys.exit(main())
