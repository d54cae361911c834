"""The capacity search end to end: the simulator, real Locust processes (local and master + 2 workers), the summary.

The simulator's ``--max-num-seqs`` gives a capacity known from its own parameters: with closed-loop users, up to
MAX_SEQS requests run at once and none waits; one user more and every request queues behind a running one for a
good part of a request's time (128 output tokens), so TTFT p99 jumps well past a threshold set a few times above
the unqueued TTFT. The highest user count meeting ``--slo-ttft-p99-ms`` is MAX_SEQS.
Probes are short (1 s warm-up, 3 s held); the assertions allow one search step.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from tests.support import LOCUST, PY, ROOT, Proc, free_port, wait_http

pytestmark = pytest.mark.slow

MAX_SEQS = 3
TTFT_SLO_MS = "300"
"""Unqueued TTFT p99 on this simulator profile is ~50-130 ms on a loaded machine; one user past MAX_SEQS: ~500 ms."""
COMMON = ["--headless", "--output-len", "fixed:128", "--prometheus-port", "0", "--seed", "3", "--stop-timeout", "5",
          "--stage-duration", "3", "--stage-warmup", "1", "-r", "50", "--slo-ttft-p99-ms", TTFT_SLO_MS]


@pytest.fixture(scope="module")
def capped_sim():
    port = free_port()
    proc = Proc([PY, "-m", "server.sim", "--port", str(port), "--profile", "deepseek-v2-lite-a100",
                 "--max-num-seqs", str(MAX_SEQS)], name="sim")
    wait_http(f"http://127.0.0.1:{port}/health", timeout=60, proc=proc)
    yield f"http://127.0.0.1:{port}"
    proc.stop()


def _locust(tmp: Path, host: str, args: list[str], workers: int = 0, timeout: float = 180.0) -> tuple[int, dict, str]:
    """Run locust (local, or a master with ``workers`` workers) to the end: (exit code, summary, master output)."""
    out = tmp / f"run-{len(list(tmp.glob('*.json')))}.json"
    argv = [LOCUST, "-f", str(ROOT / "locustfile.py"), "--host", host, *COMMON, *args,
            "--llm-summary-json", str(out), "StreamingChatUser"]
    procs = []
    if workers:
        port = free_port()
        argv[3:3] = ["--master", "--master-bind-host", "127.0.0.1", "--master-bind-port", str(port),
                     "--expect-workers", str(workers)]
        procs = [Proc([LOCUST, "-f", str(ROOT / "locustfile.py"), "--worker", "--master-host", "127.0.0.1",
                       "--master-port", str(port), "StreamingChatUser"], name=f"worker{i}") for i in range(workers)]
    try:
        with Proc(argv, name="locust") as master:
            rc = master.wait(timeout)
            log = master.output()
        assert "Traceback" not in log, log[-4000:]
        for p in procs:
            p.wait(30)
            assert "Traceback" not in p.output(), p.output()[-4000:]
        return rc, json.loads(out.read_text()), log
    finally:
        for p in procs:
            p.stop()


def _show(title: str, cap: dict) -> None:
    print(f"\n{title}: {cap['statement']}")
    for p in cap["probes"]:
        ttft = next((c["value"] for c in p["checks"] or [] if c["name"] == "ttft_p99_ms"), None)
        print(f"  {p['stage']:<22} passed={p['passed']!s:<5} reqs={p['requests']:<4} ttft_p99={ttft or 0:7.1f} ms"
              f" out={p['output_per_s'] or 0:6.1f} tok/s early={p['early_stop']}")


def _judged_all(summary: dict) -> None:
    """Each probe was judged on all of its requests (the final stage rows count the same)."""
    rows = {s["name"]: s["requests"] for s in summary["stages"]}
    assert [(p["stage"], p["requests"]) for p in summary["capacity"]["probes"]] == [
        (p["stage"], rows[p["stage"]]) for p in summary["capacity"]["probes"]]


def _check_found(cap: dict, max_probes: int) -> None:
    assert cap["status"] == "found" and cap["confirmed"], cap["statement"]
    assert MAX_SEQS - 1 <= cap["users"] <= MAX_SEQS, cap["statement"]  # within one search step (precision 1)
    assert cap["probes_used"] == len(cap["probes"]) <= max_probes
    assert [p["load"] for p in cap["probes"]].count(cap["users"]) >= 2  # the boundary was repeated
    assert any(not p["passed"] and p["load"] > cap["users"] for p in cap["probes"])  # a failing load bounds it
    binding = cap["binding_slo"]
    assert binding["name"] == "ttft_p99_ms" and binding["value"] <= float(TTFT_SLO_MS)
    assert cap["goodput_rps"] > 0 and cap["output_per_s"] > 0


def test_users_search_finds_the_simulators_seat_count_and_prices_it(capped_sim, tmp_path):
    rc, summary, log = _locust(tmp_path, capped_sim, ["--shape", "slo-search", "--search-users", "1:8",
                                                      "--search-max-probes", "7", "--gpus", "2",
                                                      "--gpu-hour-price", "2.5"])
    cap = summary["capacity"]
    _show("local", cap)
    assert rc == 0, log[-3000:]
    jsonschema.Draft202012Validator(json.loads((ROOT / "docs" / "summary.schema.json").read_text())).validate(summary)
    _check_found(cap, 7)
    _judged_all(summary)
    # the cost by hand from the summary's own figures: 2 GPUs x 2.5 $/h over one hour's output tokens
    tok_s = cap["output_per_s"]
    assert cap["output_per_s_per_gpu"] == pytest.approx(tok_s / 2)
    assert cap["usd_per_million_output_tokens"] == pytest.approx(2 * 2.5 / (tok_s * 3600) * 1e6)
    assert "capacity users=" in log


def test_users_search_with_a_master_and_two_workers(capped_sim, tmp_path):
    rc, summary, log = _locust(tmp_path, capped_sim, ["--shape", "slo-search", "--search-users", "1:8",
                                                      "--search-max-probes", "7"], workers=2)
    cap = summary["capacity"]
    _show("master + 2 workers", cap)
    assert rc == 0, log[-3000:]
    assert summary["workers"] == 2
    _check_found(cap, 7)


def test_no_load_meets_the_slo_says_so_and_exits_3(capped_sim, tmp_path):
    rc, summary, log = _locust(tmp_path, capped_sim, ["--shape", "slo-search", "--search-users", "1:4",
                                                      "--slo-ttft-p99-ms", "1"])
    cap = summary["capacity"]
    assert rc == 3
    assert cap["status"] == "none" and cap["users"] is None and cap["output_per_s"] is None
    assert cap["statement"].startswith("no load in --search-users 1:4 meets the SLOs: the lowest, users=1, breached")
    assert f"CHECK FAILED: {cap['statement']}" in log


def test_the_largest_allowed_load_still_meets_it_says_so(capped_sim, tmp_path):
    rc, summary, _log = _locust(tmp_path, capped_sim, ["--shape", "slo-search", "--search-users", "1:2"])
    cap = summary["capacity"]
    assert rc == 0
    assert cap["status"] == "max_allowed" and cap["users"] == 2
    assert "the largest allowed load, users=2, still meets every SLO" in cap["statement"]
    assert [p["load"] for p in cap["probes"]] == [1, 2, 2]


def test_rate_search_with_poisson_arrivals_stays_under_the_seat_bound(capped_sim, tmp_path):
    """Open loop: MAX_SEQS seats each busy one E2E per request bound the rate at MAX_SEQS / E2E; Poisson bursts
    queue requests below it, so the capacity under a TTFT SLO lies under that bound, and a rate at most
    --search-precision above it breaches."""
    rc, summary, log = _locust(tmp_path, capped_sim, ["--shape", "slo-search", "--search-rate", "1:16",
                                                      "--search-precision", "0.25", "--search-max-probes", "8",
                                                      "--arrival", "poisson", "--max-concurrency", "6",
                                                      "--stage-duration", "5", "--stage-warmup", "2"])
    cap = summary["capacity"]
    _show("rate, poisson", cap)
    assert rc == 0, log[-3000:]
    assert cap["status"] == "found" and cap["axis"] == "rate" and cap["users"] is None, cap["statement"]
    assert cap["probes_used"] <= 8
    unqueued_e2e_s = next(s for s in summary["stages"] if s["name"] == cap["probes"][0]["stage"])["e2e_ms"]["p50"] / 1e3
    assert 1 <= cap["rate"] < MAX_SEQS / unqueued_e2e_s
    above = min(p["load"] for p in cap["probes"] if not p["passed"] and p["load"] > cap["rate"])
    assert above / cap["rate"] - 1 <= 0.25
    _judged_all(summary)


def test_stop_on_saturation_ends_a_concurrency_sweep(capped_sim, tmp_path):
    """Past MAX_SEQS users output tok/s stays flat while TTFT climbs: the first over-saturated level is judged as the
    next one ends (on complete data) and the sweep stops there, before its last level."""
    args = ["--shape", "concurrency-sweep", "--sweep-users", "1,3,6,12,24,48", "--stage-warmup", "0",
            "--stage-duration", "4", "--output-len", "fixed:32", "--slo-ttft-p99-ms", "100000",
            "--llm-stop-on", "saturation"]
    rc, summary, log = _locust(tmp_path, capped_sim, args)
    assert rc == 0, log[-3000:]
    measured = [s["name"] for s in summary["stages"] if not s["warmup"]]
    stop = summary["saturation"]["stopped_sweep"]
    assert "users=48" not in measured and stop["stage"] == measured[-2] and "TTFT p99 grew" in stop["reason"]
    assert int(stop["stage"].split("=")[1]) > MAX_SEQS
    assert summary["saturation"]["stage"] == stop["stage"]
    assert summary["capacity"] is None  # not a search
