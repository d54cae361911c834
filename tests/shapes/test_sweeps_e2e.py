"""Sweeps end to end: the simulator, real Locust processes (local and master + 2 workers), the summary JSON.

Every run is short (stages of a few seconds at 64 output tokens) and the assertions are about ratios and
structure, so they hold on a busy machine. A capped simulator (``--max-num-seqs 2``) gives a server whose
capacity is known: past two requests in flight, throughput stops growing and requests queue.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support import LOCUST, ROOT, Proc, free_port, start_sim

pytestmark = pytest.mark.slow

COMMON = ["--headless", "--output-len", "fixed:64", "--prometheus-port", "0", "--seed", "3", "--stop-timeout", "5"]


@pytest.fixture(scope="module")
def sim():
    """A roomy server; few KV blocks so the server's KV usage is a visible fraction."""
    proc, url = start_sim("--num-gpu-blocks", "2000", profile="deepseek-v2-lite-a100")
    yield url
    proc.stop()


@pytest.fixture(scope="module")
def capped_sim():
    proc, url = start_sim("--max-num-seqs", "2", profile="deepseek-v2-lite-a100")
    yield url
    proc.stop()


def _locust(tmp: Path, host: str, args: list[str], timeout: float = 150.0, workers: int = 0) -> tuple[dict, str]:
    """Run locust (local, or a master with ``workers`` workers) to the end; return (summary, master output)."""
    run = len(list(tmp.glob("run-*.summary.json")))
    out = tmp / f"run-{run}.summary.json"
    argv = [LOCUST, "-f", str(ROOT / "locustfile.py"), "--host", host, *COMMON, *args,
            "--llm-summary-json", str(out), "--json-file", str(tmp / f"run-{run}-locust"), "StreamingChatUser"]
    procs = []
    if workers:
        port = free_port()
        argv[3:3] = ["--master", "--master-bind-host", "127.0.0.1", "--master-bind-port", str(port),
                     "--expect-workers", str(workers)]
        for i in range(workers):
            procs.append(Proc([LOCUST, "-f", str(ROOT / "locustfile.py"), "--worker", "--master-host", "127.0.0.1",
                               "--master-port", str(port), "StreamingChatUser"], name=f"worker{i}"))
    try:
        with Proc(argv, name="locust") as master:
            rc = master.wait(timeout)
            log = master.output()
        assert rc in (0, 1), f"locust exited {rc}:\n{log[-4000:]}"
        assert "Traceback" not in log, log[-4000:]
        for p in procs:
            p.wait(30)
            assert "Traceback" not in p.output(), p.output()[-4000:]
        return json.loads(out.read_text()), log
    finally:
        for p in procs:
            p.stop()


def _show(title: str, summary: dict) -> None:
    """The per-stage figures (visible with ``pytest -s``)."""
    print(f"\n{title}: workers={summary['workers']} saturation={summary['saturation']}")
    for s in summary["stages"]:
        print(f"  {s['name']:<28} users={s['users']} rate={s['rate']} reqs={s['requests']:<4}"
              f" span={s['end_s'] - s['start_s']:5.1f}s out={s['output_per_s'] or 0:7.1f} tok/s"
              f" prompt={s['prompt_tokens_mean'] or 0:6.1f} ttft_p99={s['ttft_ms']['p99'] or 0:7.1f}ms"
              f" queue_p50={s['client_queue_ms']['p50'] or 0:7.1f}ms kv_fill={s['client_kv_block_fill']}"
              f" kv_srv={s['server_kv_usage_mean']}")
    if summary.get("open_loop"):
        print(f"  open_loop: {summary['open_loop']}")


def _measured(summary: dict) -> list[dict]:
    return [s for s in summary["stages"] if not s["warmup"]]


def _locust_total(path: Path) -> int:
    """Locust's own request count (``--json-file``)."""
    stats = json.loads(path.read_text())
    return sum(e["num_requests"] for e in stats)


def test_concurrency_sweep_local_and_distributed_agree(sim, tmp_path):
    args = ["--shape", "concurrency-sweep", "--sweep-users", "1,4,16", "--stage-duration", "5", "-r", "50"]
    local, _ = _locust(tmp_path, sim, args)
    _show("local 1,4,16", local)
    measured = _measured(local)
    assert [s["name"] for s in measured] == ["users=1", "users=4", "users=16"]
    tok = [s["output_per_s"] for s in measured]
    assert tok[0] < tok[1] < tok[2], tok
    assert tok[2] > 2 * tok[0], tok
    for s in measured:
        assert 4.5 <= s["end_s"] - s["start_s"] <= 5.0 + 4.0  # the dwell, and its ramp (--stage-warmup 0)
        assert s["client_queue_ms"]["max"] == 0.0  # closed loop: sent when asked
    assert sum(s["requests"] for s in local["stages"]) == local["requests"]["total"] + local["requests"]["warmup"]
    assert local["saturation"]["stage"] is None

    dist, _ = _locust(tmp_path, sim, args, workers=2)
    _show("master + 2 workers 1,4,16", dist)
    assert dist["workers"] == 2
    assert [s["name"] for s in dist["stages"]] == [s["name"] for s in local["stages"]]
    for a, b in zip(_measured(dist), measured, strict=True):
        assert a["users"] == b["users"]
        assert 4.5 <= a["end_s"] - a["start_s"] <= 5.0 + 10.0  # the workers' ramp is slower on a busy box
    # every worker result is stamped with a master stage: per-stage counts add up to the totals
    stage_total = sum(s["requests"] for s in dist["stages"])
    assert stage_total == dist["requests"]["total"] + dist["requests"]["warmup"]
    assert stage_total == _locust_total(tmp_path / "run-1-locust.json")
    d_tok = [s["output_per_s"] for s in _measured(dist)]
    assert d_tok[0] < d_tok[1] < d_tok[2], d_tok


def test_sweep_past_capacity_names_the_saturation_stage(capped_sim, tmp_path):
    # steady levels: a warm-up second each keeps the ramp and the server's backlog of the last level (or of the
    # module's previous test) out of the levels compared
    # two seats: at 3 users one request always waits, so the seats never idle between a user's requests and 3 runs
    # at capacity (at exactly 2 users a loaded client's gaps left it 7 % short, and 4 read as growth); 6 is flat
    args = ["--shape", "concurrency-sweep", "--sweep-users", "1,3,6", "--stage-duration", "6", "-r", "50",
            "--stage-warmup", "1"]
    summary, _ = _locust(tmp_path, capped_sim, args)
    _show("capped sim 1,3,6", summary)
    measured = _measured(summary)
    assert [s["name"] for s in measured] == ["users=1", "users=3", "users=6"]
    tok = {s["name"]: s["output_per_s"] for s in measured}
    assert tok["users=3"] > 1.5 * tok["users=1"], tok  # below capacity: more users, more tokens
    assert summary["saturation"]["stage"] == "users=6", summary["saturation"]
    assert "TTFT p99 grew" in summary["saturation"]["reason"]


def test_length_sweep_prompt_tokens_and_kv_fill(sim, tmp_path):
    # a warm-up second each: the 16 users' ramp and the uniform stage's tail stay out of the KV means compared
    args = ["--shape", "length-sweep", "-u", "16", "-r", "50", "--stage-duration", "8", "--stage-warmup", "1",
            "--length-sweep", "uniform:128:1024,zipf:1.2:16:4096"]
    summary, _ = _locust(tmp_path, sim, args)
    _show("length sweep", summary)
    uni, zipf = _measured(summary)
    assert (uni["name"], zipf["name"]) == ("len=uniform:128:1024", "len=zipf:1.2:16:4096")
    assert (uni["users"], uni["input_len"], zipf["input_len"]) == (16, "uniform:128:1024", "zipf:1.2:16:4096")
    assert summary["tokens"]["source"] == "usage"  # the server's prompt token count
    assert uni["prompt_tokens_mean"] == pytest.approx(576, rel=0.10)
    assert zipf["prompt_tokens_mean"] < 0.6 * uni["prompt_tokens_mean"]
    # short Zipf prompts leave more of their last KV block empty (about 99% vs 96% filled blocks)
    assert uni["client_kv_block_fill"] - zipf["client_kv_block_fill"] > 0.01
    assert uni["server_kv_usage_mean"] is not None and zipf["server_kv_usage_mean"] is not None, "no server KV"
    assert uni["server_kv_usage_mean"] > 1.3 * zipf["server_kv_usage_mean"]


def test_open_loop_overload_shows_queue_not_lower_rate(capped_sim, tmp_path):
    args = ["--shape", "rate-sweep", "--request-rate", "1,12", "--stage-duration", "8", "--max-concurrency", "6",
            "--arrival", "poisson"]
    summary, _ = _locust(tmp_path, capped_sim, args)
    _show("open loop 1,12 req/s", summary)
    low, high = _measured(summary)
    assert (low["rate"], high["rate"]) == (1.0, 12.0)
    # the client could not send 12/s through 6 users on a 2-sequence server: requests waited in the client
    assert high["client_queue_ms"]["p50"] > 10 * max(low["client_queue_ms"]["p50"], 10.0)
    assert high["ttft_ms"]["p99"] > 2 * low["ttft_ms"]["p99"]
    rows = {r["name"]: r for r in summary["open_loop"]["stages"]}
    row = rows["rate=12"]
    # the schedule kept the asked rate over the stage's own measured span (Poisson, seeded: 96 arrivals +- 10 %)
    assert row["duration_s"] == pytest.approx(8.0, abs=0.5), row
    offered = row["scheduled"] + row["unsent"]
    assert row["offered_rps"] == pytest.approx(offered / row["duration_s"], rel=1e-3)  # both rounded to 3 decimals
    assert row["offered_rps"] == pytest.approx(12.0, rel=0.12), row
    assert rows["rate=12"]["late"] > rows["rate=12"]["scheduled"] / 2
