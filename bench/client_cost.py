"""Client CPU per streamed token: the LLM users vs. a bare gevent socket reader, side by side.

Starts the scripted server on 127.0.0.1 and, for each stream count, runs AT THE SAME TIME (1) a real
``locust --headless`` process with ``StreamingChatUser`` (model name ``users``) and (2)
``bench.bare_reader`` (gevent sockets that only count chunks; model ``bare``), each with that many
streams. Running them together means both see the same machine: on a shared box the load moves from
second to second, and only the ratio of two clients measured in the same window is stable.

The cost is MARGINAL: each client's CPU time (/proc/PID/stat, user + system) and the tokens the
server streamed to it (counted per model) are read at two instants of the run — after a warm-up
(both clients streaming for ``--warmup`` seconds) and a window later — so start-up never enters the figure:
µs/token = (cpu_b - cpu_a) / (tokens_b - tokens_a). Repeats give medians and every repeat's ratio.

Each row also prints the users' excess over the floor (µs/token), the tokens/s each client got against
what the script asks for (streams x tokens per request / request time) and the server's CPU (cores): a
client that gets less than the script asks for while the server is near a whole core was limited by the
server or the machine, not by itself. The server runs on epoll (``--selector epoll``): two clients of
512 streams are more connections than select() serves.

    python -m bench.client_cost          # 64 streams x 5 ms, 256 x 10 ms, 512 x 20 ms between tokens; 3 repeats
    python -m bench.client_cost --streams 64 --window 10 --json          # one setting at --itl-ms (20 ms)
    python -m bench.client_cost --users-only          # users without the other packages' listeners
    python -m bench.client_cost --baseline /path/to/other/checkout       # that tree's users too, same windows

``--baseline DIR`` runs a third client beside the two: the same locust command from another checkout (e.g. a
``git worktree`` of the commit before a change), so a change's before/after ratios come from the same windows.
The load average (``/proc/loadavg``) is printed with every row: on a shared machine only the ratios compare.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from server.core.ports import free_port as _free_port
from workload.argtypes import milliseconds, non_negative_seconds, positive_int, seconds

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
LOCUST = str(Path(PY).parent / "locust")
_TICK = os.sysconf("SC_CLK_TCK")
TTFT_MS = 50.0
TARGET = 1.25
"""Users' CPU per token over the bare reader's, where neither the server nor the machine is the limit."""
QUIET = ["--prometheus-port", "0", "--server-metrics-url", "off"]  # no port clash, no scraping of /metrics


def _stats(host: str) -> dict:
    with urllib.request.urlopen(f"{host}/stats", timeout=10) as r:
        return json.loads(r.read())


def wait_up(host: str) -> None:
    """Wait (up to 10 s) until the scripted server at ``host`` answers /stats."""
    for _ in range(100):
        try:
            _stats(host)
            return
        except OSError:
            time.sleep(0.1)


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of a running process (/proc/PID/stat fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def users_argv(host: str, streams: int, seconds: float, max_tokens: int, locustfile: str) -> list[str]:
    extra = QUIET if locustfile == "locustfile.py" else []
    return [
        LOCUST, "-f", locustfile, *extra, "--headless", "--host", host, "-u", str(streams), "-r", str(streams),
        "-t", f"{int(seconds)}s", "--only-summary", "--input-len", "32", "--output-len", str(max_tokens),
        "--model", "users", "--loglevel", "WARNING", "StreamingChatUser",
    ]


def bare_argv(host: str, streams: int, seconds: float, max_tokens: int) -> list[str]:
    port = host.rsplit(":", 1)[1]
    return [PY, "-m", "bench.bare_reader", "--port", port, "--streams", str(streams), "--seconds", str(seconds),
            "--max-tokens", str(max_tokens), "--model", "bare"]


CLIENTS = ("users", "bare reader")
READY_TOKENS = 30
"""Tokens per stream every client has streamed before the warm-up starts (the first requests may precede the end
of a client's start-up)."""
BASELINE = "baseline"


def side_by_side(host: str, streams: int, warmup: float, window: float, max_tokens: int, locustfile: str,
                 server_pid: int | None = None, baseline: Path | None = None) -> dict:
    """One repeat: the clients at once; their marginal µs/token over the same window."""
    seconds = 600 + warmup + window  # stopped once the window is read: -t must not end a client that started slowly
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "HF_HUB_OFFLINE": "1"}
    procs = {
        "users": (users_argv(host, streams, seconds, max_tokens, locustfile), ROOT, env),
        "bare reader": (bare_argv(host, streams, seconds, max_tokens), ROOT, env),
    }
    keys = {"users": "tokens_sent:users", "bare reader": "tokens_sent:bare"}
    if baseline is not None:
        argv = users_argv(host, streams, seconds, max_tokens, locustfile)
        argv[argv.index("--model") + 1] = BASELINE
        procs[BASELINE] = (argv, baseline, {**env, "PYTHONPATH": str(baseline)})
        keys[BASELINE] = f"tokens_sent:{BASELINE}"
    running = {
        k: subprocess.Popen(v, cwd=cwd, env=e, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        for k, (v, cwd, e) in procs.items()
    }
    try:
        # the window opens `warmup` seconds after every client streamed READY_TOKENS per stream: start-up
        # (imports, tokenizer, prompt pool, test_start look-ups) takes from 2 to 30 s on a busy machine, and the
        # first requests can go out before it has ended (their streams then stall until it has)
        deadline = time.monotonic() + 120
        while not all(_stats(host).get(key, 0) >= READY_TOKENS * streams for key in keys.values()):
            if time.monotonic() > deadline or any(p.poll() is not None for p in running.values()):
                raise FileNotFoundError
            time.sleep(0.2)
        time.sleep(warmup)
        s0 = _stats(host)
        c0 = {k: _cpu_s(p.pid) for k, p in running.items()}
        srv0, w0 = (_cpu_s(server_pid) if server_pid else 0.0), time.monotonic()
        time.sleep(window)
        s1 = _stats(host)
        c1 = {k: _cpu_s(p.pid) for k, p in running.items()}
        srv1, w1 = (_cpu_s(server_pid) if server_pid else 0.0), time.monotonic()
    except (FileNotFoundError, ProcessLookupError):
        errs = {k: v[-2000:] for k, v in _stop(running).items()}
        raise SystemExit(f"a client ended early or never streamed {READY_TOKENS} tokens per stream: {errs}") from None
    logs = _stop(running)  # the window is read: stop them now rather than at their -t
    row: dict = {}
    for k in running:
        tokens = s1.get(keys[k], 0) - s0.get(keys[k], 0)
        if tokens <= 0:
            raise SystemExit(f"{k}: no tokens streamed in the window ({s0}, then {s1}): is the machine saturated? "
                             f"Its log: {logs[k][-1500:]}")
        cpu = c1[k] - c0[k]
        row[k] = {"us_per_token": cpu / tokens * 1e6, "cpu_s": round(cpu, 3), "tokens": tokens,
                  "tokens_per_s": tokens / (w1 - w0)}
    row["ratio"] = row["users"]["us_per_token"] / row["bare reader"]["us_per_token"]
    if baseline is not None:
        row["baseline_ratio"] = row[BASELINE]["us_per_token"] / row["bare reader"]["us_per_token"]
    row["server_cores"] = (srv1 - srv0) / (w1 - w0)
    row["loadavg"] = loadavg()
    return row


def _stop(running: dict[str, subprocess.Popen]) -> dict[str, str]:
    """Stop every client (killed when SIGTERM has not ended it in 30 s: a busy one with hundreds of streams can take
    longer); their logs."""
    logs = {}
    for k, p in running.items():
        p.terminate()
        try:
            logs[k] = p.communicate(timeout=30)[1].decode(errors="replace")
        except subprocess.TimeoutExpired:
            p.kill()
            logs[k] = p.communicate(timeout=30)[1].decode(errors="replace")
    return logs


def loadavg() -> float:
    """The machine's 1-minute load average (/proc/loadavg): how busy the box was while a figure was taken."""
    return float(Path("/proc/loadavg").read_text().split()[0])


SHORT = 0.9
"""A client that got less than this share of the tokens/s the script asks for was held back by something else."""


def _short(row: dict) -> bool:
    return min(row[k]["tokens_per_s"] for k in CLIENTS) < SHORT * row["scripted_tokens_per_s"]


SETTINGS = "64x5,256x10,512x20"
"""The default settings: streams x milliseconds between tokens."""


def _settings(text: str) -> list[tuple[int, float]]:
    """``STREAMSxITL_MS,...`` (e.g. ``64x5,256x10``)."""
    out = []
    for part in text.split(","):
        n, _, itl = part.strip().partition("x")
        try:
            out.append((positive_int(n), milliseconds(itl)))
        except (ValueError, argparse.ArgumentTypeError):
            raise argparse.ArgumentTypeError(f"{part!r}: expected STREAMSxITL_MS, e.g. 64x5") from None
    return out


def _median(xs: list[float]) -> float:
    xs = sorted(xs)
    mid = len(xs) // 2
    return xs[mid] if len(xs) % 2 else (xs[mid - 1] + xs[mid]) / 2


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.client_cost", description=__doc__.split("\n")[0])
    p.add_argument("--settings", type=_settings, default=None,
                   help=f"comma list of STREAMSxITL_MS (default {SETTINGS}; --streams overrides)")
    p.add_argument("--streams", default=None, help="comma list of concurrent streams (per client), all at --itl-ms")
    p.add_argument(
        "--warmup", type=non_negative_seconds, default=3.0, help="seconds of streaming before the first CPU reading"
    )
    p.add_argument("--window", type=seconds, default=8.0, help="seconds between the two CPU readings")
    p.add_argument("--repeat", type=positive_int, default=3, help="repeats; medians are reported")
    p.add_argument("--itl-ms", type=milliseconds, default=20.0, help="milliseconds between tokens with --streams")
    p.add_argument("--max-tokens", type=positive_int, default=200)
    p.add_argument("--users-only", action="store_true", help="users without the other packages' listeners")
    p.add_argument("--baseline", type=Path, default=None,
                   help="another checkout whose users run beside (before/after a change in the same windows)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    args = p.parse_args(argv)
    locustfile = "bench/users_only_locustfile.py" if args.users_only else "locustfile.py"
    if args.streams:
        settings = [(int(x), args.itl_ms) for x in args.streams.split(",")]
    else:
        settings = args.settings or _settings(SETTINGS)
    out: dict = {"locustfile": locustfile, "max_tokens": args.max_tokens, "warmup_s": args.warmup,
                 "window_s": args.window, "baseline": str(args.baseline) if args.baseline else None}
    clients = CLIENTS + ((BASELINE,) if args.baseline else ())
    for n, itl in settings:
        port = _free_port()
        server = subprocess.Popen(
            [PY, "-m", "server.scripted", "--port", str(port), "--ttft-ms", str(TTFT_MS), "--itl-ms", str(itl),
             "--tokenizer", "none", "--selector", "epoll"],
            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        host = f"http://127.0.0.1:{port}"
        try:
            wait_up(host)
            runs = [
                side_by_side(host, n, args.warmup, args.window, args.max_tokens, locustfile, server.pid,
                             args.baseline)
                for _ in range(args.repeat)
            ]
        finally:
            server.terminate()
            server.wait(10)
        row: dict = {
            k: {m: _median([r[k][m] for r in runs]) for m in ("us_per_token", "tokens_per_s")} for k in clients
        }
        row["itl_ms"] = itl
        row["ratio"] = _median([r["ratio"] for r in runs])
        if args.baseline:
            row["baseline_ratio"] = _median([r["baseline_ratio"] for r in runs])
        row["excess_us_per_token"] = _median([r["users"]["us_per_token"] - r["bare reader"]["us_per_token"]
                                              for r in runs])
        row["server_cores"] = _median([r["server_cores"] for r in runs])
        row["loadavg"] = [r["loadavg"] for r in runs]
        # what the script asks for: every stream repeats TTFT + max_tokens x ITL for max_tokens tokens
        row["scripted_tokens_per_s"] = n * args.max_tokens / (TTFT_MS + args.max_tokens * itl) * 1000
        row["runs"] = runs
        out[f"{n}x{itl:g}"] = row
        if not args.json:
            ratios = ", ".join(f"{r['ratio']:.2f}" for r in runs)
            base = ""
            if args.baseline:
                each = ", ".join(f"{r['baseline_ratio']:.2f}" for r in runs)
                base = (f" | baseline {row[BASELINE]['us_per_token']:5.1f} µs/token, ratio "
                        f"{row['baseline_ratio']:.2f} ({each})")
            print(
                f"{n:>4} streams x {itl:g} ms: users {row['users']['us_per_token']:5.1f} µs/token | bare reader "
                f"{row['bare reader']['us_per_token']:5.1f} | ratio {row['ratio']:.2f} (ratios {ratios}){base} | "
                f"users - bare {row['excess_us_per_token']:4.1f} µs/token | tokens/s users "
                f"{row['users']['tokens_per_s']:,.0f}, bare {row['bare reader']['tokens_per_s']:,.0f} of "
                f"{row['scripted_tokens_per_s']:,.0f} scripted | server {row['server_cores']:.2f} cores | "
                f"load avg {', '.join(f'{x:.1f}' for x in row['loadavg'])}",
                flush=True,
            )
            if _short(row):
                note = f"a client got under {SHORT:.0%} of the scripted tokens/s: the machine (or the server)"
                print(f"      ^ {note} was the limit in this row, not the client; rerun it on an idle machine")
    if args.json:
        print(json.dumps(out, indent=1))
    else:
        worst = max(out[f"{n}x{itl:g}"]["ratio"] for n, itl in settings)
        print(
            f"users / bare reader, medians of {args.repeat} ({args.window:g} s windows): worst {worst:.2f} "
            f"(target {TARGET}); the ratio is what to compare, absolute µs move with the machine's load"
        )


if __name__ == "__main__":
    main()
