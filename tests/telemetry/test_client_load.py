"""The client saturation guard: a worker starved by a CPU hog (tests/telemetry/hog_locustfile.py) is
reported client-bound — per worker in the summary, in the console, live on the master's log — with the advice to
add processes; the probe's own arithmetic on a known lag."""

from __future__ import annotations

import json
import pickle
import time
import urllib.request

import gevent
import jsonschema
import numpy as np
import pytest

from telemetry.control import client_load
from telemetry.control.client_load import ClientLoad, LoopProbe, processes_needed
from tests.support import LOCUST, PY, ROOT, Proc, free_port, locust_cluster, wait_http


def test_probe_measures_a_loop_held_for_a_known_time():
    probe = LoopProbe(interval_s=0.01)
    probe.start()
    gevent.sleep(0.2)
    quiet = probe.take()
    end = time.perf_counter() + 0.05
    while time.perf_counter() < end:  # hold the loop 50 ms
        pass
    gevent.sleep(0.05)
    held = probe.take()
    probe.stop()
    assert len(quiet["lag_ms"]) >= 10 and sorted(quiet["lag_ms"])[len(quiet["lag_ms"]) // 2] < 5.0, quiet["lag_ms"]
    # the sample spanning the hold woke ~40 ms late (50 ms held, less the 10 ms it meant to sleep)
    assert 35.0 <= max(held["lag_ms"]) <= 200.0, held["lag_ms"]  # (above 50 only when this box preempts us)
    assert 0.0 < held["cpu_s"] <= held["wall_s"] + 0.01  # CPU time of the hold: at most its wall time


def test_sizing_rule_names_processes_here_or_workers_elsewhere(monkeypatch):
    assert processes_needed([0.95]) == 2 and processes_needed([0.3, 0.3]) == 3  # at least one more than now
    assert processes_needed([1.0, 1.0, 1.0]) == 5  # 3 cores at 0.7 a process
    monkeypatch.setattr(client_load, "cores", lambda: 8)
    assert "run --processes 5 " in client_load.sizing_advice(5, 3.0, 3)
    monkeypatch.setattr(client_load, "cores", lambda: 2)
    assert "run 5 worker processes over several machines" in client_load.sizing_advice(5, 3.0, 3)


def test_verdict_needs_a_second_of_probing_and_names_the_reason():
    load = ClientLoad()
    load.add("w1", {"lag_ms": [0.2] * 97 + [12.0] * 3, "cpu_s": 1.0, "wall_s": 4.0})
    load.add("w2", {"lag_ms": [0.2] * 100, "cpu_s": 3.8, "wall_s": 4.0})
    load.add("w3", {"lag_ms": [50.0] * 5, "cpu_s": 1.0, "wall_s": 1.0})  # 5 x (50 + 50) ms: too short to judge
    load.add("w4", {"lag_ms": [900.0, 950.0], "cpu_s": 2.0, "wall_s": 2.0})  # starved: 2 samples, 1.95 s
    s = load.section()
    assert s["bound"] == ["w1", "w2", "w4"]
    # the sizing rule: 0.25 + 0.95 + 1.0 + 1.0 cores at 0.7 a process -> 5 (one more than the 4 there are)
    assert s["processes_needed"] == 5 and "4 processes used 3.20 cores" in s["advice"], s["advice"]
    assert s["workers"]["w1"]["why"] == "event-loop lag p99 12.0 ms > 5 ms"
    assert s["workers"]["w2"]["why"] == "CPU 95% of a core > 90%" and s["workers"]["w2"]["cpu"] == 0.95
    assert s["workers"]["w3"]["client_bound"] is False and s["workers"]["w3"]["samples"] == 5


def test_a_long_run_keeps_bounded_state_and_its_quantiles():
    """An hour of one worker's probe (72,000 samples in 3,600 reports) leaves a sketch whose size does not grow
    with the samples, and the row's p50/p99 are those of every sample within the sketch's 0.5 %, the max exact."""
    rng = np.random.default_rng(7)
    load = ClientLoad()
    lags = rng.lognormal(mean=-1.0, sigma=1.2, size=72_000)  # ms: mostly sub-ms, a tail past 5 ms
    for i in range(0, lags.size, 20):
        load.add("w1", {"lag_ms": lags[i:i + 20].tolist(), "cpu_s": 0.3, "wall_s": 1.0})
    row = load.row("w1")
    assert row["samples"] == lags.size
    for key, q in (("lag_p50_ms", 0.5), ("lag_p99_ms", 0.99)):
        exact = float(np.quantile(lags, q))
        assert abs(row[key] - exact) <= 0.006 * exact, (key, row[key], exact)
    assert row["lag_max_ms"] == round(float(lags.max()), 3)
    # what the master keeps for the worker: the samples themselves would pickle to ~650 KB
    kept = len(pickle.dumps(load.procs))
    assert kept < 40_000, kept


@pytest.mark.slow
def test_starved_worker_is_reported_client_bound(tmp_path):
    srv_port = free_port()
    host = f"http://127.0.0.1:{srv_port}"
    locustfile = "tests/telemetry/hog_locustfile.py"
    summary = tmp_path / "s.json"
    server = Proc([PY, "-m", "tests.users.hostile_server", "--port", str(srv_port), "--modes", "ok"], name="hostile")
    cluster = locust_cluster(
        ["--headless", "-u", "4", "-r", "4", "-t", "5s", "--host", host, "--prometheus-port", "0",
         "--server-metrics-url", "off", "--input-len", "fixed:16", "--output-len", "fixed:8", "--llm-summary-json",
         str(summary), "StreamingChatUser", "CpuHogUser"],
        workers=1, locustfile=locustfile, master_env={"LLM_TEST_RESULTS": str(tmp_path / "m.jsonl")},
        worker_env=lambda _i: {"LLM_TEST_RESULTS": str(tmp_path / "w.jsonl")})
    # the server answers before the master starts: a master checks its --host at start and exits 2 when it does
    # not answer (CI, a busy box: the server still importing, the master gone, the worker retrying for 30 s)
    with server:
        wait_http(f"{host}/health", proc=server)
        with cluster as (master, (worker,)):
            rc = master.wait(60)
            out = master.output()
            try:
                worker.wait(30)
            except AssertionError as e:
                raise AssertionError(f"{e}\n--- the master's output (rc {rc}) ---\n{out[-3000:]}") from None
    assert rc in (0, 1), out[-3000:]
    assert "Traceback" not in out, out[-3000:]
    full = json.loads(summary.read_text())
    jsonschema.validate(full, json.loads((ROOT / "docs" / "summary.schema.json").read_text()))
    s = full["client_load"]

    (wid, row), = s["workers"].items()
    assert s["client_bound"] is True and s["bound"] == [wid] and row["client_bound"] is True, json.dumps(s)
    # the hog holds the loop 30 ms at a time: the probe wakes up to ~30 ms late, and the process burns its core
    assert row["lag_p99_ms"] > 20.0 and row["samples"] >= 10, row
    assert row["why"].startswith("event-loop lag p99 "), row
    assert out.count(f"client-bound: {wid} event-loop lag p99") == 1, out[-3000:]  # live, once
    assert f"LLM timings are client-bound on {wid}: " in out and "sizing: 1 process used " in out


@pytest.mark.slow
def test_starved_local_run_says_so_in_the_web_ui(tmp_path):
    # a local run with the web UI: /llm/client-load has the verdict and the Logs tab (/logs) the warning, live
    port, srv_port = free_port(), free_port()
    host, web = f"http://127.0.0.1:{srv_port}", f"http://127.0.0.1:{port}"
    server = Proc([PY, "-m", "tests.users.hostile_server", "--port", str(srv_port), "--modes", "ok"], name="hostile")
    try:
        wait_http(f"{host}/health", proc=server)  # an --autostart run checks its server at start
    except BaseException:
        server.stop()
        raise
    ui = Proc([LOCUST, "-f", "tests/telemetry/hog_locustfile.py", "--web-host", "127.0.0.1", "--web-port", str(port),
               "--autostart", "-u", "3", "-r", "3", "--host", host, "--prometheus-port", "0", "--server-metrics-url",
               "off", "--input-len", "fixed:16", "--output-len", "fixed:8", "StreamingChatUser", "CpuHogUser"],
              name="webui", env={"LLM_TEST_RESULTS": str(tmp_path / "r.jsonl")})
    with server, ui:
        wait_http(f"{host}/health", proc=server)
        wait_http(f"{web}/", proc=ui, timeout=60)

        def get(path: str):
            with urllib.request.urlopen(web + path, timeout=10) as r:
                return json.loads(r.read())

        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not get("/llm/client-load")["client_bound"]:
            time.sleep(0.5)
        s = get("/llm/client-load")
        logs = get("/logs")["master"]
    assert s["client_bound"] is True and s["bound"] == ["local"], s
    warned = [line for line in logs if "client-bound: local event-loop lag p99" in line]
    assert len(warned) == 1 and "sizing: 1 process used " in warned[0], logs[-10:]
