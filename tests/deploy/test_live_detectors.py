"""The live detectors end to end (issue #16): a simulator whose batching collapses mid-run (``--batch-cap-at``), a
Locust master and one worker, and the tests' real Prometheus scraping the master's exporter every second.

- ``llm_batching_degraded`` reads 0 in every scrape before the cap and 1 within four windows of it;
- the master logs the flip once; the summary's ``detectors`` section holds the state;
- every Grafana dashboard query returns data from this run's Prometheus, mid-run (the GPU panels read a GPU
  exporter, ours or NVIDIA's DCGM: tests/deploy/test_dashboard.py serves both to a real Prometheus);
- ``--llm-stop-on batching`` ends a (local) run when the detector fires and the summary says why.

The cap's wall time is bounded from both sides: the sim's clock starts after its launch and before its /health
answers, so the cap lies in [launch + T, ready + T]; "0 before" is checked before the lower bound, "1 within four
windows" from the lower bound (both the stricter reading).
"""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from telemetry.options import STOP_ON_CHOICES
from tests.deploy.promql import concrete, dashboard_queries, query
from tests.requires import require_tool
from tests.support import LOCUST, Proc, free_port, prometheus_config, start_sim, wait_http

pytestmark = pytest.mark.slow

WINDOW_S = 6.0
CAP_AT_S = 26.0  # sim seconds; the run starts a few seconds after the sim, so the baseline (3 windows) is settled
GPU_PANELS = ("'GPU memory' A", "'GPU memory' B", "'GPU utilization' A")
"""Read from a GPU exporter (ours or DCGM's), which this box has not: tests/deploy/test_dashboard.py feeds both."""
LOAD = ["-u", "16", "-r", "16", "--input-len", "fixed:128", "--output-len", "fixed:64", "--model", "sim-tiny",
        "--server-metrics-interval", "0.5"]


def _range(base: str, expr: str, start: float, end: float) -> list[tuple[float, float]]:
    """(t, value) samples of a one-series query, from the raw samples Prometheus stored (a range selector)."""
    body = query(base, f"{expr}[{int(end - start) + 5}s]")
    assert body.get("status") == "success", body
    result = body["data"]["result"]
    assert len(result) <= 1, result
    return [(float(t), float(v)) for t, v in result[0]["values"]] if result else []


def test_batching_gauge_flips_within_four_windows_of_the_cap(tmp_path):
    prom_exe = require_tool("prometheus", "prometheus")
    sim_port, exporter, master_port, prom_port = free_port(), free_port(), free_port(), free_port()
    prometheus_config(tmp_path / "prometheus.yml", {"locust": exporter, "llm-server": sim_port})
    summary_path = tmp_path / "summary.json"
    launch = time.time()
    # legacy names and a few immediate 500/429 answers: the dashboard's legacy-KV and failed-by-kind queries have data
    sim, _url = start_sim(f"--batch-cap-at={CAP_AT_S:g}:1", "--legacy-metrics", "--fault-rate", "0.02", "--fault-kinds",
                          "500,429", port=sim_port)
    with sim:
        ready = time.time()
        prom = Proc([prom_exe, f"--config.file={tmp_path / 'prometheus.yml'}", f"--storage.tsdb.path={tmp_path / 'db'}",
                     f"--web.listen-address=127.0.0.1:{prom_port}"], name="prometheus")
        master = Proc([LOCUST, "-f", "locustfile.py", "--headless", "--master", "--expect-workers", "1",
                       "--master-bind-host", "127.0.0.1", "--master-bind-port", str(master_port),
                       "--host", f"http://127.0.0.1:{sim_port}", "--prometheus-port", str(exporter), "-t", "50s",
                       "--only-summary", "--llm-summary-json", str(summary_path), "--attribution-window",
                       f"{WINDOW_S:g}", "--slo-ttft-p99-ms", "600000", *LOAD, "StreamingChatUser"],
                      name="master")
        worker = Proc([LOCUST, "-f", "locustfile.py", "--worker", "--master-host", "127.0.0.1", "--master-port",
                       str(master_port)], name="worker")
        with prom, master, worker:
            base = f"http://127.0.0.1:{prom_port}"
            wait_http(base + "/-/ready", timeout=30, proc=prom)
            deadline = time.monotonic() + 80
            while master.alive() and time.monotonic() < deadline:  # mid-run: the detector fired, the run goes on
                if query(base, "llm_batching_degraded == 1").get("data", {}).get("result"):
                    break
                time.sleep(0.5)
            time.sleep(2)  # two more scrapes, so rate() over the dashboard's windows has points after the flip
            queries = {where: query(base, concrete(expr, "1m")) for where, expr in dashboard_queries()
                       if where.split(" ", 1)[1] not in GPU_PANELS}
            end = time.time()
            degraded = _range(base, 'llm_batching_degraded{job="locust"}', launch, end)
            running = _range(base, 'vllm:num_requests_running{job="llm-server"}', launch, end)
            master.wait(90)
            worker.wait(30)
    log = master.output()
    cap_low, cap_high = launch + CAP_AT_S, ready + CAP_AT_S
    assert degraded, f"no llm_batching_degraded scraped\n{log[-3000:]}"
    before = [(t, v) for t, v in degraded if t < cap_low]
    assert len(before) >= 5 and all(v == 0 for _, v in before), before  # scraped, and 0, before the cap
    fired = [t for t, v in degraded if v == 1]
    assert fired, f"never degraded: {degraded}\n{log[-3000:]}"
    delay = fired[0] - cap_low
    print(f"llm_batching_degraded 1 at {delay:.1f} s after the cap's lower bound ({(fired[0] - cap_high):.1f} s after "
          f"its upper bound); window {WINDOW_S:g} s; 0 in {len(before)} scrapes before it")
    assert 0 < fired[0] - cap_low <= 4 * WINDOW_S, (delay, degraded)
    # the simulator's own gauge shows the collapse the detector judged: one running sequence after the cap
    assert any(v >= 4 for t, v in running if t < cap_low) and all(v <= 1 for t, v in running if t > fired[0])
    assert log.count("live detector batching: FIRED") == 1, log[-3000:]
    summary = json.loads(summary_path.read_text())
    det = summary["detectors"]
    assert det["batching"]["baseline"]["batch_size_median"] >= 4 and det["stopped_by"] is None, det
    assert [c["name"] for c in det["slo"]] == ["ttft_p99_ms"] and not det["slo"][0]["breached"], det["slo"]
    assert len(queries) >= 50, sorted(queries)
    empty = {w: b.get("error") or "no data" for w, b in queries.items()
             if b.get("status") != "success" or not b["data"]["result"]}
    assert not empty, f"dashboard queries without data from the run's Prometheus: {empty}"


def test_stop_on_batching_ends_the_run_and_says_why(tmp_path):
    port = free_port()
    out = tmp_path / "summary.json"
    # 8 s after the first request, however long the locust start takes on a busy box (a cap at the simulator's
    # second 8 once landed before a slow start's first request, and the baseline itself was the collapse)
    sim, _url = start_sim("--batch-cap-at=+8:1", port=port)
    with sim:
        argv = [LOCUST, "-f", "locustfile.py", "--headless", "--host", f"http://127.0.0.1:{port}", "--only-summary",
                "--prometheus-port", "0", "--llm-summary-json", str(out), "-t", "60s", "--llm-stop-on", "batching",
                "--attribution-window", "2", *LOAD, "StreamingChatUser"]
        with Proc(argv, name="locust") as loc:
            loc.wait(75)
            log = loc.output()
    summary = json.loads(out.read_text())
    why = summary["detectors"]["stopped_by"]
    assert why is not None and why["detector"] == "batching", log[-3000:]
    assert "batch median" in why["reason"] and why["at_s"] < 40, why
    assert summary["duration_s"] < 45, summary["duration_s"]  # ended well before -t 60s
    assert "--llm-stop-on: stopping the run, live detector batching fired" in log
    assert summary["detectors"]["stop_on"] == ["batching"]
    # the tokenizer layer of the P99 attribution: every request's own building time, measured on the user
    build = summary["attribution"]["decomposition"]["prompt_build_client_ms"]
    ok = summary["requests"]["ok"]
    assert build["count"] == summary["prompt_build_ms"]["count"] >= ok > 0, (build, summary["requests"])
    assert 0 < build["mean"] < 50 and build["p99"] >= build["p50"] > 0, build
    assert f"in mean {build['mean']:.2f} ms" in summary["attribution"]["decomposition"]["statement"]


def test_stop_on_names_are_checked():
    proc = subprocess.run([LOCUST, "-f", "locustfile.py", "--headless", "--llm-stop-on", "batching,slow", "-t", "1s"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    names = STOP_ON_CHOICES
    assert (f"expected a comma list of {', '.join(names)} such as {','.join(names)}, got 'batching,slow'"
            in proc.stderr)

