"""Many concurrent streams in ONE Locust process against a slow server: is the timing still the server's?

Starts the scripted server (epoll: any number of connections) with a slow answer — first token after
``--ttft-ms``, then one token every ``--itl-ms`` (default 1 token/s, 30 tokens) — and one ``locust --headless``
process with ``--streams`` users (``StreamingChatUser``), ramped at ``--spawn-rate``. After the ramp and a settle
time it reads the client's RSS and open sockets; at the end (users finish their request: ``--stop-timeout``) it
compares:

- TTFT p50/p99 as the client measured it (the summary's ``ttft_ms``) against the server's own record of the
  first-token delay it produced (``/stats`` ``ttft_sent_ms``, its clock started at the kernel's arrival stamp of the
  request);
- requests: the server's completed streams against the client's ok + failed (lost = the difference; must be 0);
- RSS per stream (the client's resident memory at the peak over the streams, and its growth over the ramp);
- sockets: the client's open TCP sockets at the peak, and requests per socket (keep-alive reuse);
- the client-load guard's verdict (event-loop lag p99, CPU) and its sizing rule when client-bound.

The open-file limit is raised to its hard limit for the processes started here; when even that is below what the
streams need (a socket each, plus the server's), the benchmark stops with a message naming the limit.

    python -m bench.many_streams                         # 10,000 streams, 60 s
    python -m bench.many_streams --streams 300 --seconds 6 --spawn-rate 300 --tokens 5 --itl-ms 200 --json  # quick

Exits nonzero on lost requests, failed requests or a run that did not end; never on a timing figure.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.client_cost import LOCUST, PY, QUIET, ROOT, _free_port, _stats, loadavg, wait_up
from workload.argtypes import milliseconds, positive_int, seconds

FDS_SPARE = 256
"""Open files beyond one socket per stream (each process has its own limit: the client's and the server's alike)."""


def raise_fd_limit(streams: int) -> int:
    """Raise this process's open-file limit (inherited by the server and locust) to its hard limit; SystemExit with
    the limit named when it is below what ``streams`` need."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = streams + FDS_SPARE
    target = hard if hard != resource.RLIM_INFINITY else max(soft, need)
    if target > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    if target < need:
        raise SystemExit(f"{streams} streams need {need} open files per process (a socket each), "
                         f"the hard limit (ulimit -Hn) is {hard}: raise it (e.g. /etc/security/limits.conf) or run "
                         f"fewer streams")
    return target


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024.0
    return 0.0


def _sockets(pid: int) -> int:
    n = 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            n += os.readlink(fd).startswith("socket:")
        except OSError:
            pass
    return n


def run(streams: int, secs: float, ttft_ms: float, itl_ms: float, tokens: int, spawn_rate: float,
        locustfile: str = "locustfile.py") -> dict:
    limit = raise_fd_limit(streams)
    port = _free_port()
    server = subprocess.Popen(
        [PY, "-m", "server.scripted", "--port", str(port), "--ttft-ms", str(ttft_ms), "--itl-ms", str(itl_ms),
         "--output-tokens", str(tokens), "--tokenizer", "none", "--selector", "epoll"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    host = f"http://127.0.0.1:{port}"
    request_s = (ttft_ms + tokens * itl_ms) / 1000.0
    out: dict = {"streams": streams, "seconds": secs, "ttft_ms": ttft_ms, "itl_ms": itl_ms, "tokens": tokens,
                 "fd_limit": limit, "loadavg_start": loadavg()}
    try:
        wait_up(host)
        with tempfile.TemporaryDirectory() as tmp:
            summary = Path(tmp) / "summary.json"
            argv = [LOCUST, "-f", locustfile, *QUIET, "--headless", "--host", host, "-u", str(streams), "-r",
                    f"{spawn_rate:g}", "-t", f"{int(secs)}s", "--stop-timeout", f"{int(request_s + 30)}",
                    "--only-summary", "--input-len", "fixed:32", "--output-len", f"fixed:{tokens}", "--model",
                    "many", "--loglevel", "WARNING", "--llm-summary-json", str(summary), "StreamingChatUser"]
            env = {**os.environ, "PYTHONUNBUFFERED": "1", "HF_HUB_OFFLINE": "1"}
            client = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            t0 = time.monotonic()
            rss0 = None
            while _stats(host).get("requests", 0) == 0:
                if client.poll() is not None or time.monotonic() - t0 > 120:
                    raise SystemExit(f"no request reached the server: {client.communicate()[1].decode()[-2000:]}")
                rss0 = _rss_mb(client.pid)
                time.sleep(0.1)
            ramp = streams / spawn_rate
            time.sleep(min(ramp + request_s / 2, max(secs - 2, 1)))  # every stream open, mid-answer
            peak = {"rss_mb": _rss_mb(client.pid), "sockets": _sockets(client.pid), "loadavg": loadavg()}
            try:
                _, err = client.communicate(timeout=secs + request_s + 120)
            except subprocess.TimeoutExpired:
                client.kill()
                raise SystemExit("the client did not end") from None
            s = json.loads(summary.read_text()) if summary.exists() else None
            if s is None:
                raise SystemExit(f"no summary: {err.decode(errors='replace')[-2000:]}")
        st = _stats(host)
    finally:
        server.terminate()
        server.wait(10)
    req = s["requests"]
    client_requests = req["ok"] + req["failed"]
    served = int(st.get("completed", 0))
    out.update({
        "ttft_client_p50_ms": s["ttft_ms"]["p50"], "ttft_client_p99_ms": s["ttft_ms"]["p99"],
        "ttft_server_p50_ms": st.get("ttft_sent_ms", {}).get("p50"),
        "ttft_server_p99_ms": st.get("ttft_sent_ms", {}).get("p99"),
        "server_late_p99_ms": st.get("late_ms", {}).get("p99"),
        "requests_server": served, "requests_sent": int(st.get("requests", 0)), "requests_client": client_requests,
        "ok": req["ok"], "failed": req["failed"], "lost": int(st.get("requests", 0)) - client_requests,
        "rss_mb_peak": peak["rss_mb"], "rss_mb_before": rss0,
        "rss_kb_per_stream": peak["rss_mb"] * 1024.0 / streams,
        "rss_growth_kb_per_stream": (peak["rss_mb"] - (rss0 or 0.0)) * 1024.0 / streams,
        "sockets_peak": peak["sockets"], "requests_per_socket": client_requests / max(peak["sockets"], 1),
        "client_load": s.get("client_load"), "loadavg_peak": peak["loadavg"], "loadavg_end": loadavg(),
        "client_log_tail": err.decode(errors="replace")[-1500:],
    })
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.many_streams", description=__doc__.split("\n")[0])
    p.add_argument("--streams", type=positive_int, default=10_000)
    p.add_argument("--seconds", type=seconds, default=60.0, help="the run's -t (users then finish their request)")
    p.add_argument("--ttft-ms", type=milliseconds, default=100.0)
    p.add_argument("--itl-ms", type=milliseconds, default=1000.0)
    p.add_argument("--tokens", type=positive_int, default=30)
    p.add_argument("--spawn-rate", type=float, default=None, help="users/s (default: all in 10 s)")
    p.add_argument("--locustfile", default="locustfile.py", help="one that imports locustfile.py's (e.g. to probe)")
    p.add_argument("--show-log", action="store_true", help="print the end of the client's log")
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    out = run(a.streams, a.seconds, a.ttft_ms, a.itl_ms, a.tokens, a.spawn_rate or max(a.streams / 10.0, 1.0),
              a.locustfile)
    if a.json:
        print(json.dumps(out, indent=1))
    else:
        cl = out["client_load"] or {}
        sizing = f"; sizing: {cl['advice']}" if cl.get("advice") else ""
        lag = [w.get("lag_p99_ms") for w in (cl.get("workers") or {}).values()]
        d50 = (out["ttft_client_p50_ms"] - out["ttft_server_p50_ms"]) if out["ttft_server_p50_ms"] else None
        r99 = (out["ttft_client_p99_ms"] / out["ttft_server_p99_ms"] - 1) if out["ttft_server_p99_ms"] else None
        print(f"{out['streams']:,} streams in one process, {out['tokens']} tokens at {out['itl_ms']:g} ms "
              f"(TTFT {out['ttft_ms']:g} ms), fd limit {out['fd_limit']}, load avg {out['loadavg_start']:.1f} / "
              f"{out['loadavg_peak']:.1f} / {out['loadavg_end']:.1f} (start / peak / end)\n"
              f"  TTFT client p50 {out['ttft_client_p50_ms']:.1f} ms vs server {out['ttft_server_p50_ms']} ms "
              f"({d50:+.1f} ms; target within 1 ms) | p99 {out['ttft_client_p99_ms']:.1f} vs "
              f"{out['ttft_server_p99_ms']} ms ({r99:+.1%}; target within 10 %) | server late p99 "
              f"{out['server_late_p99_ms']} ms\n"
              f"  requests: server sent {out['requests_sent']:,}, completed {out['requests_server']:,}; client "
              f"{out['requests_client']:,} (ok {out['ok']:,}, failed {out['failed']}) -> lost {out['lost']}\n"
              f"  RSS {out['rss_mb_peak']:.0f} MB at the peak = {out['rss_kb_per_stream']:.1f} KB/stream "
              f"({out['rss_growth_kb_per_stream']:.1f} KB/stream over the ramp) | sockets open {out['sockets_peak']:,}"
              f" ({out['requests_per_socket']:.2f} requests per socket) | client-bound "
              f"{cl.get('client_bound')} (loop lag p99 {lag} ms){sizing}",
              flush=True)
        if a.show_log:
            print(out["client_log_tail"])
    return 1 if out["lost"] or out["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
