"""Telemetry end to end with real processes: master + 2 workers and ``--processes 2`` against a one-process run, a
SIGKILLed worker, the SLO gate's exit code, and a real Prometheus scraping the master's exporter while the simulator
is scraped for KV usage.

Servers: ``server.scripted`` (known timing: first token after TTFT, then one token per ITL; ``/stats``
counts what it served) and ``server.sim`` (vLLM-like, V1 metric names). Every run is bounded in time.
"""

from __future__ import annotations

import json
import re
import signal
import time
import urllib.parse
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from telemetry.measure.sketch import DEFAULT_ALPHA
from telemetry.metrics import BOUNDS
from tests.requires import require_tool
from tests.support import LOCUST, PY, Proc, free_port, get_json, locust_cluster, prometheus_config, wait_http

pytestmark = pytest.mark.slow

LOCUSTFILE = "tests/users/results_locustfile.py"  # the project's locustfile + one JSON line per result
TTFT_MS, ITL_MS, TOKENS = 60, 5, 24
LOAD = ["--input-len", "fixed:64", "--output-len", f"fixed:{TOKENS}", "--only-summary"]
QUIET = ["--server-metrics-url", "off", "--prometheus-port", "0"]
SECONDS = 10
# the summary's percentiles come from the cells' sketches: each within DEFAULT_ALPHA (relative) of the exact order
# statistic of the values it holds (telemetry/measure/sketch.py), whichever process recorded them
PERCENTILES = {"ttft_ms": "ttft", "itl_ms": "itl", "tpot_ms": "tpot", "e2e_ms": "e2e"}


def _scripted(ttft_ms: int = TTFT_MS) -> tuple[Proc, str]:
    port = free_port()
    proc = Proc([PY, "-m", "server.scripted", "--port", str(port), "--ttft-ms", str(ttft_ms), "--itl-ms", str(ITL_MS),
                 "--output-tokens", str(TOKENS)], name="scripted")
    host = f"http://127.0.0.1:{port}"
    wait_http(f"{host}/health", proc=proc)
    return proc, host


def _rows(paths: list[Path]) -> list[dict]:
    return [json.loads(line) for p in paths if p.exists() for line in p.read_text().splitlines()]


def _distributed(host: str, tmp: Path, seconds: int, extra: list[str], kill_after: float | None = None,
                 term_master_after: float | None = None):
    """Master + 2 workers (real processes); returns (master output, rc, summary, rows, worker procs)."""
    summary_path = tmp / "summary.json"
    files = [tmp / f"w{i}.jsonl" for i in range(2)]
    # --stop-timeout: at quit the users finish the request in flight (the server has counted it), then the
    # worker sends its final report; Locust does not forward this option, so each process gets it
    cluster = locust_cluster(
        ["--headless", "-u", "6", "-r", "6", "-t", f"{seconds}s", "--host", host, "--llm-summary-json",
         str(summary_path), "--stop-timeout", "5", *LOAD, *extra, "StreamingChatUser"],
        worker_args=("--stop-timeout", "5"), locustfile=LOCUSTFILE,
        master_env={"LLM_TEST_RESULTS": str(tmp / "master.jsonl")},
        worker_env=lambda i: {"LLM_TEST_RESULTS": str(files[i])})
    with cluster as (master, workers):
        if kill_after is not None or term_master_after is not None:
            # the run has started when the server has finished two requests per user (a file that exists says
            # only that the worker imported the locustfile); then the delay: past a 3 s report period
            deadline = time.monotonic() + 60
            while get_json(f"{host}/stats").get("completed", 0) < 12 and time.monotonic() < deadline:
                time.sleep(0.2)
        if kill_after is not None:
            time.sleep(kill_after)
            workers[0].signal(signal.SIGKILL)
        if term_master_after is not None:
            time.sleep(term_master_after)
            master.signal(signal.SIGTERM)
        rc = master.wait(seconds + 90)
        out = master.output()
        for w in workers[1:] if kill_after is not None else workers:
            w.wait(30)
    assert summary_path.exists(), out[-4000:]
    return out, rc, json.loads(summary_path.read_text()), _rows(files), workers


def _exact_ms(rows: list[dict], field: str, q: float) -> float:
    """The exact order statistic the sketch answers for (rank q*(n-1), rounded down) over every process's rows."""
    values = [v for r in rows if r["ok"] for v in (r[field] if isinstance(r[field], list) else [r[field]])]
    return float(np.quantile(values, q, method="lower")) * 1000.0


def _merged_like_one_process(s: dict, rows: list[dict], one: dict) -> None:
    """The merged percentiles are the percentiles of every process's results together, and equal a one-process
    run's against the same deterministic server: each summary within the sketch's accuracy of its exact value, so
    the two summaries within twice that of each other."""
    for key, field in PERCENTILES.items():
        for q_name, q in (("p50", 0.5), ("p90", 0.9)):
            exact = _exact_ms(rows, field, q)
            assert abs(s[key][q_name] - exact) <= DEFAULT_ALPHA * exact * (1 + 1e-9), (key, q_name, s[key], exact)
        assert abs(s[key]["p50"] - one[key]["p50"]) <= 2 * DEFAULT_ALPHA * one[key]["p50"], (key, s[key], one[key])


@pytest.fixture(scope="module")
def one_process(tmp_path_factory) -> dict:
    """The reference: one local process with the same 6 users against the same scripted server."""
    tmp = tmp_path_factory.mktemp("one")
    server, host = _scripted()
    with server:
        summary_path = tmp / "summary.json"
        # with an SLO it meets (the SLO gate's passing side: exit code 0, no CHECK FAILED line)
        run = Proc([LOCUST, "-f", LOCUSTFILE, "--headless", "-u", "6", "-r", "6", "-t", f"{SECONDS}s", "--host", host,
                    "--llm-summary-json", str(summary_path), "--stop-timeout", "5", "--slo-ttft-p99-ms", "2000", *LOAD,
                    *QUIET, "StreamingChatUser"],
                   name="local", env={"LLM_TEST_RESULTS": str(tmp / "local.jsonl")})
        with run:
            rc = run.wait(SECONDS + 60)
        served = get_json(f"{host}/stats")
    s = json.loads(summary_path.read_text())
    assert rc == 0 and s["requests"]["ok"] == served["completed"] > 20, run.output()[-3000:]
    assert [(c["name"], c["passed"]) for c in s["slo"]["checks"]] == [("ttft_p99_ms", True)], s["slo"]
    assert "CHECK FAILED" not in run.output()
    return s


def test_master_and_two_workers_totals_match_the_server_and_percentiles_a_one_process_run(tmp_path, one_process):
    server, host = _scripted()
    with server:
        out, rc, s, rows, _ = _distributed(host, tmp_path, SECONDS, QUIET)
        served = get_json(f"{host}/stats")
        model = get_json(f"{host}/v1/models")["data"][0]["id"]
    assert rc == 0, out[-3000:]
    assert s["workers"] == 2 and s["requests"]["failed"] == 0
    assert s["model"] == model and f"model {model} at" in out  # no --model: what the workers' users resolved and sent
    # every request the server completed, and every token it sent, is in the merged summary
    assert s["requests"]["ok"] == served["completed"] == len(rows) > 20
    assert s["tokens"]["output"] == served["output_tokens"] == sum(r["output_tokens"] for r in rows)
    _merged_like_one_process(s, rows, one_process)
    # ... and the server's scripted TTFT; on a busy 2-core box the client adds a few ms of scheduling
    assert TTFT_MS - 0.5 <= s["ttft_ms"]["p50"] <= TTFT_MS + 5.0, s["ttft_ms"]
    assert s["itl_ms"]["p50"] == pytest.approx(ITL_MS, abs=1.0)
    assert "LLM summary" in out and "2 worker(s)" in out


def test_processes_2_totals_match_the_server_and_percentiles_a_one_process_run(tmp_path, one_process):
    """``--processes 2``: Locust forks two workers under a master in one command; the same merge as above."""
    server, host = _scripted()
    summary_path = tmp_path / "summary.json"
    with server:
        # the forked workers inherit the options (--stop-timeout too) and each opens the results file to append;
        # the master binds its own free port (the default 5557 on every interface clashes with other runs)
        mport = str(free_port())
        run = Proc([LOCUST, "-f", LOCUSTFILE, "--headless", "--processes", "2", "--master-bind-host", "127.0.0.1",
                    "--master-bind-port", mport, "--master-host", "127.0.0.1", "--master-port", mport, "-u", "6",
                    "-r", "6", "-t", f"{SECONDS}s", "--host", host, "--llm-summary-json", str(summary_path),
                    "--stop-timeout", "5", *LOAD, *QUIET, "StreamingChatUser"],
                   name="processes", env={"LLM_TEST_RESULTS": str(tmp_path / "rows.jsonl")})
        with run:
            rc = run.wait(SECONDS + 60)
        served = get_json(f"{host}/stats")
    out = run.output()
    assert rc == 0 and summary_path.exists(), out[-3000:]
    s = json.loads(summary_path.read_text())
    rows = _rows([tmp_path / "rows.jsonl"])
    assert s["workers"] == 2 and s["requests"]["failed"] == 0, out[-3000:]
    assert s["requests"]["ok"] == served["completed"] == len(rows) > 20
    assert s["tokens"]["output"] == served["output_tokens"] == sum(r["output_tokens"] for r in rows)
    _merged_like_one_process(s, rows, one_process)


def test_sigterm_to_the_master_still_collects_every_workers_final_report(tmp_path):
    server, host = _scripted()
    with server:
        out, _rc, s, rows, _ = _distributed(host, tmp_path, 60, QUIET, term_master_after=5.0)
        served = get_json(f"{host}/stats")
    # results recorded after the workers' last periodic report travel in their final one, sent on quit
    assert s["requests"]["total"] == len(rows) == served["completed"] > 10, out[-3000:]
    assert s["tokens"]["output"] == served["output_tokens"]
    assert "sent no final report" not in out


def test_worker_killed_mid_run_leaves_a_summary_and_a_warning(tmp_path):
    server, host = _scripted()
    with server:
        out, rc, s, rows, workers = _distributed(
            host, tmp_path, 16, ["--server-metrics-url", "off", "--prometheus-port", "0"], kill_after=4.5
        )
    assert workers[0].popen.returncode == -signal.SIGKILL
    # a lost worker is a warning, not an error: every request that was reported succeeded, so Locust exits 0
    assert rc == 0, out[-3000:]
    # warned once while running (not at every check of the worker list) and once in the final summary
    assert out.count("stopped sending heartbeats") == 1 and out.count("was lost mid-run") == 1, out[-3000:]
    assert len(s["workers_lost"]) == 1 and s["workers"] == 2
    shipped = re.search(r"stopped sending heartbeats .* keeps the (\d+) requests it reported", out)
    assert shipped is not None, out[-3000:]
    shipped_n = int(shipped.group(1))
    survivor, dead = _rows([tmp_path / "w1.jsonl"]), _rows([tmp_path / "w0.jsonl"])
    # it ran 4.5 s past its first requests (a 3 s report period and a margin) and cannot have reported more than
    # it recorded
    assert 0 < shipped_n <= len(dead), (shipped_n, len(dead))
    # the summary holds exactly the survivor's results and what the dead worker shipped before it died
    assert s["requests"]["total"] == len(survivor) + shipped_n, (s["requests"], len(survivor), shipped_n)
    assert s["requests"]["failed"] == 0
    assert "LLM summary" in out


def test_slo_gate_exit_code(tmp_path, one_process):
    """A crossed SLO beside a met one: exit code 3 and one CHECK FAILED line, the crossed one's. (The passing side,
    exit code 0, is the one-process reference run's, which has an SLO it meets.)"""
    server, host = _scripted()
    with server:
        p = Proc([LOCUST, "-f", LOCUSTFILE, "--headless", "-u", "2", "-r", "2", "-t", "8s", "--host", host,
                  "--server-metrics-url", "off", "--prometheus-port", "0", "--slo-ttft-p99-ms", "30",
                  "--slo-itl-p95-ms", "2000", *LOAD, "StreamingChatUser"], name="locust",
                 env={"LLM_TEST_RESULTS": str(tmp_path / "r.jsonl")})
        with p:
            rc = p.wait(90)
            out = p.output()
    assert rc == 3, out[-3000:]
    failed = [line for line in out.splitlines() if "CHECK FAILED" in line]
    assert len(failed) == 1 and "CHECK FAILED: ttft_p99_ms" in failed[0] and "> 30 (threshold 30)" in failed[0], failed


def _promql(base: str, query: str) -> list:
    url = f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": query})
    data = get_json(url)
    assert data["status"] == "success", data
    return data["data"]["result"]


def test_real_prometheus_scrapes_the_master_exporter(tmp_path):
    """Load on the scripted server (TTFT 70 ms, inside vLLM's 60-80 ms bucket, so Prometheus' in-bucket
    interpolation has one right answer); the server signals come from the simulator's /metrics."""
    prometheus = require_tool("prometheus", "prometheus")
    sim_port, prom_port, exp_port, mport = (free_port() for _ in range(4))
    sim_url = f"http://127.0.0.1:{sim_port}"
    scripted, host = _scripted(ttft_ms=70)
    prometheus_config(tmp_path / "prometheus.yml", {"locust": exp_port})
    summary_path = tmp_path / "summary.json"
    with (
        scripted,
        Proc([PY, "-m", "server.sim", "--host", "127.0.0.1", "--port", str(sim_port), "--profile", "cpu-tiny"],
             name="sim") as sim,
        Proc([prometheus, f"--config.file={tmp_path / 'prometheus.yml'}",
              f"--web.listen-address=127.0.0.1:{prom_port}", f"--storage.tsdb.path={tmp_path / 'tsdb'}"],
             name="prometheus") as prom,
    ):
        wait_http(f"{sim_url}/health", proc=sim)
        prom_base = f"http://127.0.0.1:{prom_port}"
        wait_http(f"{prom_base}/-/ready", proc=prom)
        master = Proc([LOCUST, "-f", LOCUSTFILE, "--headless", "--master", "--master-bind-host", "127.0.0.1",
                       "--master-bind-port", str(mport), "--expect-workers", "1", "-u", "4", "-r", "4", "-t", "30s",
                       "--host", host, "--prometheus-port", str(exp_port), "--server-metrics-interval", "1",
                       "--server-metrics-url", f"{sim_url}/metrics",
                       "--llm-summary-json", str(summary_path), *LOAD, "StreamingChatUser"], name="master",
                      env={"LLM_TEST_RESULTS": str(tmp_path / "m.jsonl")})
        worker = Proc([LOCUST, "-f", LOCUSTFILE, "--worker", "--master-host", "127.0.0.1", "--master-port", str(mport)],
                      name="worker", env={"LLM_TEST_RESULTS": str(tmp_path / "w.jsonl")})
        with master, worker:
            q50 = "histogram_quantile(0.5, sum by (le) (rate(llm_time_to_first_token_seconds_bucket[15s])))"
            prom_p50, kv = None, None
            deadline = time.monotonic() + 45
            time.sleep(20)  # 15 s of rate window with traffic
            while time.monotonic() < deadline and (prom_p50 is None or kv is None):
                r = _promql(prom_base, q50)
                if r and r[0]["value"][1] not in ("NaN", "+Inf"):
                    prom_p50 = float(r[0]["value"][1])
                kr = _promql(prom_base, "llm_server_kv_cache_usage_ratio")
                if kr:
                    kv = float(kr[0]["value"][1])
                time.sleep(1)
            master.wait(120)
            out = master.output()
    assert prom_p50 is not None and kv is not None, out[-3000:]
    s = json.loads(summary_path.read_text())
    assert s["server"]["metric_names"] == "vllm-v1" and s["server"]["scrapes"] > 10
    # the load goes to the scripted server; the simulator only answers /metrics, so its KV pool is empty: the
    # relayed gauge is the server's (0), not the client's block fill of its own in-flight requests (> 0)
    assert kv == 0.0 and s["server"]["kv_cache_usage"]["max"] == 0.0
    assert s["client_kv_block_fill"]["mean"] > 0.0
    # Prometheus interpolates inside vLLM's buckets: its median must sit in the bucket of the merged p50
    p50 = s["ttft_ms"]["p50"] / 1000
    assert 0.070 <= p50 < 0.080, s["ttft_ms"]
    bounds = (0.0, *BOUNDS["ttft"])
    i = next(j for j in range(1, len(bounds)) if p50 <= bounds[j])
    lo, hi = bounds[i - 1], bounds[i]
    assert lo <= prom_p50 <= hi, (prom_p50, p50, (lo, hi))
