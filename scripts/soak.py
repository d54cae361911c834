"""Soak: master + 2 workers at steady load against the scripted server with a mix of faults, for SOAK_MINUTES
(default 30); every process samples its RSS, open fds, sockets and greenlets every 30 s (scripts/soak_locustfile.py).

Fails (exit 1) when, after the warm-up (the first 5 minutes, or a third of a shorter run), a process's RSS grows more
than 20 MB, its open fds or greenlets grow, or a request is unaccounted for (the summary's ok + failed must equal
the requests the server received). Writes results/soak-<N>m.json (samples per process, figures, verdict).

    python -m scripts.soak --minutes 30      # make soak
    python -m scripts.soak --minutes 1 --sample-s 4   # the variant in make test (tests/test_soak.py)
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
import urllib.request
from pathlib import Path

from server.core.ports import free_port as _free_port

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
LOCUST = str(Path(PY).parent / "locust")
RSS_GROWTH_MB = 20.0
FD_SLACK = 4
"""Open fds/sockets may differ by this many between samples (a connection being replaced at the moment)."""
GREENLET_SLACK = 8
"""Greenlets may differ by this many (a request's greenlet finishing or starting at the moment)."""
USERS = 16
FAULTS = "500,429,cut,junk,stall,nodone"


def _wait_http(url: str, timeout: float = 30.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"soak: {url} not up after {timeout} s")


def judge(samples: list[dict], duration_s: float) -> tuple[dict, list[str]]:
    """Per process (role#pid): figures after the warm-up and the failures."""
    warm = min(300.0, duration_s / 3.0)
    procs: dict[str, list[dict]] = {}
    for s in samples:
        procs.setdefault(f"{s['role']}#{s['pid']}", []).append(s)
    figures, failures = {}, []
    for name, rows in sorted(procs.items()):
        rows.sort(key=lambda r: r["t_s"])
        # the end of the run (users stopping, the summary being built) is not the steady state
        steady = [r for r in rows if warm <= r["t_s"] <= duration_s - 5.0]
        if len(steady) < 2:
            failures.append(f"{name}: {len(steady)} samples after the warm-up (run too short?)")
            continue
        base, last = steady[0], steady[-1]
        f = {
            "samples": len(rows),
            "judged": len(steady),
            "rss_mb": [base["rss_mb"], max(r["rss_mb"] for r in steady)],
            "rss_growth_mb": round(max(r["rss_mb"] for r in steady) - base["rss_mb"], 2),
            "fds": [base["fds"], last["fds"]],
            "sockets": [base["sockets"], last["sockets"]],
            "greenlets": [base["greenlets"], last["greenlets"]],
        }
        figures[name] = f
        if f["rss_growth_mb"] > RSS_GROWTH_MB:
            failures.append(f"{name}: RSS grew {f['rss_growth_mb']} MB after the warm-up (limit {RSS_GROWTH_MB:g})")
        for key, slack in (("fds", FD_SLACK), ("sockets", FD_SLACK), ("greenlets", GREENLET_SLACK)):
            if last[key] > base[key] + slack and all(r[key] > base[key] for r in steady[1:]):
                failures.append(f"{name}: {key} grew from {base[key]} to {last[key]} after the warm-up")
    return figures, failures


def run(minutes: float, out: Path, sample_s: float) -> int:
    duration = minutes * 60.0
    tmp = Path(tempfile.mkdtemp(prefix="soak-"))
    samples_path, summary_path = tmp / "samples.jsonl", tmp / "summary.json"
    sport, mport = _free_port(), _free_port()
    host = f"http://127.0.0.1:{sport}"
    env = {**os.environ, "SOAK_SAMPLES": str(samples_path), "SOAK_SAMPLE_S": str(sample_s), "HF_HUB_OFFLINE": "1",
           "PYTHONUNBUFFERED": "1"}
    procs: list[subprocess.Popen] = []
    logs = []

    def start(argv: list[str], name: str) -> subprocess.Popen:
        log = open(tmp / f"{name}.log", "w")  # noqa: SIM115
        logs.append(log)
        p = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        procs.append(p)
        return p

    try:
        start([PY, "-m", "server.scripted", "--port", str(sport), "--ttft-ms", "40", "--itl-ms", "4", "--output-tokens",
               "32", "--fault", FAULTS, "--fault-every", "5", "--stall-s", "10"], "server")
        _wait_http(f"{host}/health")
        locustfile = "scripts/soak_locustfile.py"
        master = start([LOCUST, "-f", locustfile, "--headless", "--master", "--master-bind-host", "127.0.0.1",
                        "--master-bind-port", str(mport), "--expect-workers", "2", "-u", str(USERS), "-r", str(USERS),
                        "-t", f"{int(duration)}s", "--host", host, "--stop-timeout", "8", "--request-timeout", "2",
                        "--input-len", "fixed:64", "--output-len", "fixed:32", "--prometheus-port", "0",
                        "--server-metrics-url", "off", "--only-summary", "--llm-summary-json", str(summary_path),
                        "StreamingChatUser", "StreamingCompletionUser"], "master")
        for i in range(2):
            start([LOCUST, "-f", locustfile, "--worker", "--master-host", "127.0.0.1", "--master-port", str(mport),
                   "--stop-timeout", "8"], f"worker{i}")
        rc = master.wait(duration + 180)
        for p in procs[2:]:
            p.wait(60)
        with urllib.request.urlopen(f"{host}/stats", timeout=5) as r:
            served = json.loads(r.read())
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
                p.wait(10)
        for log in logs:
            log.close()
    samples = [json.loads(line) for line in samples_path.read_text().splitlines()] if samples_path.exists() else []
    summary = json.loads(summary_path.read_text()) if summary_path.exists() else {}
    figures, failures = judge(samples, duration)
    req = summary.get("requests") or {}
    ok, failed = req.get("ok"), req.get("failed")
    if ok is None or ok + failed != served.get("requests"):
        failures.append(f"unaccounted requests: ok {ok} + failed {failed} != server's {served.get('requests')}")
    for name in ("master", "worker0", "worker1"):
        if "Traceback" in (tmp / f"{name}.log").read_text(errors="replace"):
            failures.append(f"a traceback in the {name}'s log ({tmp / f'{name}.log'})")
    report = {"minutes": minutes, "users": USERS, "faults": FAULTS, "locust_rc": rc, "server": served,
              "requests": req, "processes": figures, "failures": failures, "samples": samples,
              "logs": str(tmp)}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1))
    print(f"soak {minutes:g} min, {USERS} users, faults {FAULTS} every 5th request: {served.get('requests')} requests "
          f"served, ok {ok} + failed {failed}")
    for name, f in figures.items():
        print(f"  {name:>16}: RSS {f['rss_mb'][0]} -> {f['rss_mb'][1]} MB (+{f['rss_growth_mb']}), fds "
              f"{f['fds'][0]} -> {f['fds'][1]}, sockets {f['sockets'][0]} -> {f['sockets'][1]}, greenlets "
              f"{f['greenlets'][0]} -> {f['greenlets'][1]} ({f['samples']} samples)")
    for line in failures:
        print(f"  FAIL {line}")
    print(f"  {'FAILED' if failures else 'passed'}; samples and figures in {out}")
    return 1 if failures else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=float(os.environ.get("SOAK_MINUTES", "30")))
    ap.add_argument("--sample-s", type=float, default=30.0)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    out = args.out or ROOT / "results" / f"soak-{args.minutes:g}m.json"
    return run(args.minutes, out, args.sample_s)


if __name__ == "__main__":
    sys.exit(main())
