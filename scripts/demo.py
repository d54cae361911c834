"""`make run`: start the simulator on 127.0.0.1, run a headless streaming test against it, stop it.

    python -m scripts.demo --users 16 --run-time 60 --out results [--profile deepseek-v2-lite-a100]

Writes OUT/summary.json and OUT/report.html; the token-level summary table is printed by the
Locust process itself. The exit code is Locust's (3 when an SLO check failed).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from server.core.ports import free_port as _free_port
from telemetry.options import LLM_PROGRESS_INTERVAL_DEFAULT
from workload.argtypes import non_negative_seconds, positive_int

ROOT = Path(__file__).resolve().parent.parent


def _wait_ready(url: str, proc: subprocess.Popen, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"demo: the simulator exited with code {proc.returncode} before it was ready")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    sys.exit(f"demo: the simulator did not answer {url} within {timeout:.0f}s")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--users", type=positive_int, default=16)
    ap.add_argument("--run-time", type=positive_int, default=60, help="seconds")
    ap.add_argument("--profile", default="deepseek-v2-lite-a100")
    ap.add_argument("--user-class", default="StreamingChatUser")
    ap.add_argument("--out", default="results")
    ap.add_argument("--progress-interval", type=non_negative_seconds, default=LLM_PROGRESS_INTERVAL_DEFAULT,
                    help="seconds between live progress lines (0 = none)")
    args = ap.parse_args(argv)

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
    sim = subprocess.Popen(
        [sys.executable, "-m", "server.sim", "--host", "127.0.0.1", "--port", str(port), "--profile", args.profile],
        cwd=ROOT, env=env, start_new_session=True,
    )
    try:
        _wait_ready(f"http://127.0.0.1:{port}/health", sim)
        locust = [
            str(Path(sys.executable).parent / "locust"), "-f", "locustfile.py", "--headless",
            "-u", str(args.users), "-r", str(args.users), "-t", f"{args.run_time}s", "--stop-timeout", "30",
            "--host", f"http://127.0.0.1:{port}", "--only-summary",
            "--llm-summary-json", str(out / "summary.json"), "--llm-report", str(out / "report.html"),
            "--prometheus-port", "0", "--llm-progress-interval", f"{args.progress_interval:g}", args.user_class,
        ]
        print("demo: " + " ".join(locust[1:]), flush=True)
        return subprocess.call(locust, cwd=ROOT, env=env)
    finally:
        if sim.poll() is None:
            os.killpg(sim.pid, signal.SIGTERM)
            try:
                sim.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(sim.pid, signal.SIGKILL)


if __name__ == "__main__":
    sys.exit(main())
