"""Helpers for end-to-end user tests: a scripted server and a real headless ``locust`` process.

with scripted("--ttft-ms", "150") as (host, stats):
    run = run_locust(host, ["-u", "8", "-t", "5s"], tmp_path)
    run.rc, run.output, run.results, stats()
"""

from __future__ import annotations

import json
import subprocess
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.support import LOCUST, PY, ROOT, Proc, free_port, wait_http


def _priority_prefix(rt: int) -> list[str]:
    """Real-time (or at least raised) priority for the timing tests' server and client where allowed:
    on a shared box other processes would otherwise delay both, and the scripted truth with them.
    Both processes are idle most of the time (a few % CPU), so they cannot starve anyone."""
    for prefix in (["chrt", "-f", str(rt)], ["nice", "-n", "-10"]):
        try:
            if subprocess.run([*prefix, "true"], capture_output=True, timeout=5).returncode == 0:
                return prefix
        except (OSError, subprocess.SubprocessError):
            continue
    return []


NICE = _priority_prefix(10)
SERVER_NICE = _priority_prefix(20)
"""The scripted server (the truth) above the client: its timer wakes then pre-empt the client's reads,
never the other way round."""
RESULTS_LOCUSTFILE = str(Path(__file__).with_name("results_locustfile.py").relative_to(ROOT))


@contextmanager
def scripted(*args: str) -> Iterator[tuple[str, Callable[[], dict]]]:
    port = free_port()
    with Proc([*SERVER_NICE, PY, "-m", "server.scripted", "--port", str(port), *args], name="scripted") as proc:
        host = f"http://127.0.0.1:{port}"
        wait_http(f"{host}/health", proc=proc)

        def stats() -> dict:
            with urllib.request.urlopen(f"{host}/stats", timeout=5) as r:
                return json.loads(r.read())

        yield host, stats


@dataclass
class LocustRun:
    rc: int
    output: str
    results: list[dict]
    """One row per Locust request event (from the test listener in results_locustfile.py)."""
    summary: dict | None
    """The telemetry summary (``--llm-summary-json``, docs/summary.schema.json)."""


def run_locust(
    host: str, args: list[str], tmp: Path, timeout: float = 90.0, locustfile: str | None = None
) -> LocustRun:
    tag = free_port()
    results, summary = tmp / f"results-{tag}.jsonl", tmp / f"summary-{tag}.json"
    argv = [*NICE, LOCUST, "-f", locustfile or RESULTS_LOCUSTFILE, "--headless", "--host", host, "--only-summary",
            "--prometheus-port", "0", "--server-metrics-url", "off",
            "--llm-summary-json", str(summary), *args]
    with Proc(argv, name="locust", env={"LLM_TEST_RESULTS": str(results)}) as proc:
        rc = proc.wait(timeout)
        out = proc.output()
    rows = [json.loads(line) for line in results.read_text().splitlines()] if results.exists() else []
    return LocustRun(rc, out, rows, json.loads(summary.read_text()) if summary.exists() else None)


def quantile_ms(values: list[float], q: float) -> float:
    import numpy as np  # noqa: PLC0415

    return float(np.quantile(np.asarray(values, dtype=float), q) * 1000.0)
