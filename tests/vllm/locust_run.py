"""Run the project's own entry point (``locust -f locustfile.py``) headless against a real server.

    summary = run_local(server.url, tmp_path, "StreamingChatUser", users=4, seconds=20,
                        extra=["--input-len", "fixed:64", "--output-len", "fixed:32"])
    summary["tokens"]["output"], summary["server"]["kv_cache_usage"]["max"]

Every run binds 127.0.0.1 only, gets free ports, stops its processes by PID, and fails with the
processes' logs when locust exits non-zero or writes no summary.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tests.support import LOCUST, ROOT, Proc, free_port

STOP_TIMEOUT_S = 60  # let in-flight requests finish at the end of -t, so every request is whole


@dataclass
class LocustRun:
    summary: dict
    stats: list[dict]
    """Locust's own final stats (``--json-file``): one entry per request name, ``num_requests`` etc."""
    output: str
    wall_s: float
    samples: list[str] = field(default_factory=list)
    """Texts of the master's Prometheus exporter, scraped during the run (when asked)."""


def _common(url: str, out: Path, seconds: int, users: int, extra: list[str]) -> list[str]:
    return [
        LOCUST, "-f", str(ROOT / "locustfile.py"), "--headless",
        "-u", str(users), "-r", str(users), "-t", f"{seconds}s",
        "--stop-timeout", str(STOP_TIMEOUT_S),
        "--host", url,
        "--llm-summary-json", str(out / "summary.json"),
        "--json-file", str(out / "locust"),
        "--server-metrics-interval", "1",
        "--only-summary",
        *extra,
    ]


def _finish(out: Path, procs: list[Proc], rc: int, t0: float, samples: list[str]) -> LocustRun:
    logs = "\n".join(f"--- {p.name} ---\n{p.output()[-6000:]}" for p in procs)
    assert rc == 0, f"locust exited {rc}\n{logs}"
    path = out / "summary.json"
    assert path.is_file(), f"no summary written\n{logs}"
    stats = json.loads((out / "locust.json").read_text())
    return LocustRun(json.loads(path.read_text()), stats, logs, time.monotonic() - t0, samples)


def run_local(url: str, out: Path, user_class: str, users: int, seconds: int, extra: list[str]) -> LocustRun:
    """One local (single-process) headless run of one user class."""
    t0 = time.monotonic()
    argv = _common(url, out, seconds, users, ["--prometheus-port", "0", *extra, user_class])
    with Proc(argv, name=f"locust-{user_class}") as proc:
        rc = proc.wait(timeout=seconds + STOP_TIMEOUT_S + 60)
        return _finish(out, [proc], rc, t0, [])


def run_distributed(
    url: str,
    out: Path,
    user_class: str,
    users: int,
    seconds: int,
    extra: list[str],
    while_running: Callable[[int], str | None] | None = None,
) -> LocustRun:
    """``--master`` + one ``--worker`` on 127.0.0.1. ``while_running(prometheus_port)`` is polled every
    second during the run; the texts it returns are kept in ``LocustRun.samples``."""
    t0 = time.monotonic()
    master_port, prom_port = free_port(), free_port()
    master_argv = _common(url, out, seconds, users, [
        "--master", "--master-bind-host", "127.0.0.1", "--master-bind-port", str(master_port),
        "--expect-workers", "1", "--prometheus-port", str(prom_port), *extra, user_class,
    ])
    worker_argv = [
        LOCUST, "-f", str(ROOT / "locustfile.py"), "--worker",
        "--master-host", "127.0.0.1", "--master-port", str(master_port), *extra, user_class,
    ]
    samples: list[str] = []
    with Proc(master_argv, name="locust-master") as master, Proc(worker_argv, name="locust-worker") as worker:
        deadline = time.monotonic() + seconds + STOP_TIMEOUT_S + 90
        while master.alive() and time.monotonic() < deadline:
            if while_running is not None:
                text = while_running(prom_port)
                if text:
                    samples.append(text)
            time.sleep(1.0)
        rc = master.wait(timeout=max(1.0, deadline - time.monotonic()))
        worker.wait(timeout=30)
        return _finish(out, [master, worker], rc, t0, samples)


def scrape(port: int) -> str | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
            return r.read().decode()
    except OSError:
        return None
