"""Client CPU per streamed token: the LLM users vs. a bare gevent socket reader, side by side.

Starts the scripted server on 127.0.0.1, then for each stream count runs (1) a real
``locust --headless`` process with ``StreamingChatUser`` and (2) ``bench.bare_reader`` (sockets that only
count chunks), each for two run lengths. The CPU time of each client process (``os.wait4`` rusage,
user + system) and the tokens the server streamed during it give a MARGINAL cost:
(cpu_long - cpu_short) / (tokens_long - tokens_short), so start-up (imports, tokenizer load) cancels.

    python -m bench.client_cost                       # 64 and 256 streams, 6 s and 12 s runs, 3 paired repeats
    python -m bench.client_cost --streams 64 --short 5 --long 10 --json

Figures are noisy on a shared machine: run it alone, and compare the ratio rather than the µs.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
LOCUST = str(Path(PY).parent / "locust")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stats(host: str) -> dict:
    with urllib.request.urlopen(f"{host}/stats", timeout=10) as r:
        return json.loads(r.read())


def _run_child(argv: list[str], host: str) -> tuple[float, int]:
    """(CPU seconds of the child, tokens the server streamed while it ran)."""
    before = _stats(host).get("tokens_sent", 0)
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _pid, status, usage = os.wait4(proc.pid, 0)
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if os.waitstatus_to_exitcode(status) not in (0, 1):
        raise SystemExit(f"{argv[0]} failed:\n{err[-3000:]}")
    time.sleep(0.3)  # streams cut at the end have been written by then
    return usage.ru_utime + usage.ru_stime, _stats(host).get("tokens_sent", 0) - before


LOCUSTFILE = ["locustfile.py"]


def users_argv(host: str, streams: int, seconds: float, max_tokens: int) -> list[str]:
    return [
        LOCUST, "-f", LOCUSTFILE[0], "--headless", "--host", host, "-u", str(streams), "-r", str(streams),
        "-t", f"{int(seconds)}s", "--only-summary", "--input-len", "32", "--output-len", str(max_tokens),
        "--loglevel", "WARNING", "StreamingChatUser",
    ]  # fmt: skip


def bare_argv(host: str, streams: int, seconds: float, max_tokens: int) -> list[str]:
    port = host.rsplit(":", 1)[1]
    return [PY, "-m", "bench.bare_reader", "--port", port, "--streams", str(streams),
            "--seconds", str(seconds), "--max-tokens", str(max_tokens)]  # fmt: skip


CLIENTS = {"users": users_argv, "bare reader": bare_argv}


def marginal_us(make_argv, host: str, streams: int, short: float, long: float, max_tokens: int) -> dict:
    cpu_s, tok_s = _run_child(make_argv(host, streams, short, max_tokens), host)
    cpu_l, tok_l = _run_child(make_argv(host, streams, long, max_tokens), host)
    if tok_l <= tok_s:
        raise SystemExit(f"no more tokens in the longer run ({tok_s} -> {tok_l}): is the machine saturated?")
    return {
        "us_per_token": (cpu_l - cpu_s) / (tok_l - tok_s) * 1e6,
        "cpu_s": [round(cpu_s, 3), round(cpu_l, 3)],
        "tokens": [tok_s, tok_l],
    }


def _median(xs: list[float]) -> float:
    xs = sorted(xs)
    mid = len(xs) // 2
    return xs[mid] if len(xs) % 2 else (xs[mid - 1] + xs[mid]) / 2


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.client_cost", description=__doc__.split("\n")[0])
    p.add_argument("--streams", default="64,256", help="comma list of concurrent streams")
    p.add_argument("--short", type=float, default=6.0, help="seconds of the short run")
    p.add_argument("--long", type=float, default=12.0, help="seconds of the long run")
    p.add_argument("--itl-ms", type=float, default=20.0)
    p.add_argument("--max-tokens", type=int, default=200)
    p.add_argument("--repeat", type=int, default=3, help="paired repeats; medians are reported")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--users-only", action="store_true", help="users without the other packages' listeners")
    args = p.parse_args(argv)
    if args.users_only:
        LOCUSTFILE[0] = "bench/users_only_locustfile.py"
    port = _free_port()
    server = subprocess.Popen(
        [PY, "-m", "server.scripted", "--port", str(port), "--ttft-ms", "50", "--itl-ms", str(args.itl_ms),
         "--tokenizer", "none"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    host = f"http://127.0.0.1:{port}"
    out: dict = {
        "locustfile": LOCUSTFILE[0],
        "itl_ms": args.itl_ms,
        "max_tokens": args.max_tokens,
        "runs_s": [args.short, args.long],
    }
    try:
        for _ in range(100):
            try:
                _stats(host)
                break
            except OSError:
                time.sleep(0.1)
        for n in (int(x) for x in args.streams.split(",")):
            runs = []
            for _ in range(args.repeat):  # users and bare reader back to back: both see the same machine
                pair = {
                    name: marginal_us(fn, host, n, args.short, args.long, args.max_tokens)
                    for name, fn in CLIENTS.items()
                }
                pair["ratio"] = pair["users"]["us_per_token"] / pair["bare reader"]["us_per_token"]
                runs.append(pair)
            row = {name: {"us_per_token": _median([r[name]["us_per_token"] for r in runs])} for name in CLIENTS}
            row["ratio"] = _median([r["ratio"] for r in runs])
            row["runs"] = runs
            out[str(n)] = row
            if not args.json:
                ratios = ", ".join(f"{r['ratio']:.2f}" for r in runs)
                print(
                    f"{n:>4} streams: users {row['users']['us_per_token']:6.1f} µs/token | "
                    f"bare reader {row['bare reader']['us_per_token']:6.1f} µs/token | ratio {row['ratio']:.2f} "
                    f"(medians of {args.repeat}; ratios {ratios})",
                    flush=True,
                )
    finally:
        server.terminate()
        server.wait(10)
    if args.json:
        print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
