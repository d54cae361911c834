"""Run outputs end to end on real processes: the simulator, a Locust master and two workers with ``--num-requests 300``
give exactly 300 requests; the summary (schema 2) validates and carries the run record and the simulator's
/version and cache config; the per-request JSONL has 300 lines that reconcile with the summary; the vLLM-bench
JSON has every field (name and type) that ``vllm bench serve --save-result --save-detailed`` (the .venv-vllm
build) writes against the same simulator; ``--max-errors`` stops a failing run with the reason in the summary.
"""

from __future__ import annotations

import json
import signal
import time

import jsonschema
import numpy as np
import pytest

from telemetry.outputs.requestlog import read_records
from tests.requires import VLLM, require
from tests.support import LOCUST, ROOT, Proc, locust_cluster, start_sim
from workload.tokenizers import tokenizer_hash

pytestmark = pytest.mark.slow

SCHEMA = json.loads((ROOT / "docs" / "summary.schema.json").read_text())
LOAD = ["--input-len", "fixed:32", "--output-len", "fixed:8", "--only-summary", "--prometheus-port", "0"]
BLOCK_SIZE = 32  # not vLLM's default 16: the summary must carry what the server says


def _sim(*extra: str) -> tuple[Proc, str]:
    return start_sim("--block-size", str(BLOCK_SIZE), "--time-scale", "0.2", *extra)


@pytest.fixture(scope="module")
def sim():
    proc, host = _sim("--no-enable-prefix-caching")  # not the profile's default: the summary must say what it runs
    with proc:
        yield host


def _master_and_two_workers(sim: str, *args: str):
    """A headless master (8 users, -t 120 s) with ``args`` and two workers; all stopped on the way out."""
    return locust_cluster(["--headless", "-u", "8", "-r", "8", "-t", "120s", "--host", sim, *args, *LOAD,
                           "StreamingChatUser"])


@pytest.fixture(scope="module")
def budget_run(sim, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("budget")
    paths = {k: tmp / n for k, n in (("summary", "s.json"), ("jsonl", "r.jsonl"), ("bench", "vb.json"))}
    args = ["--num-requests", "300", "--api-key", "sekrit-value", "--seed", "7", "--llm-summary-json",
            str(paths["summary"]), "--llm-requests-jsonl", str(paths["jsonl"]), "--vllm-bench-json",
            str(paths["bench"])]
    with _master_and_two_workers(sim, *args) as (master, _workers):
        rc = master.wait(150)
        out = master.output()
    assert rc == 0, out[-3000:]
    return {"out": out, "summary": json.loads(paths["summary"].read_text()),
            "lines": read_records(paths["jsonl"]), "bench": json.loads(paths["bench"].read_text())}


def test_num_requests_is_exact_across_master_and_two_workers(budget_run):
    s = budget_run["summary"]
    assert s["requests"]["total"] == 300 and s["requests"]["failed"] == 0
    assert s["run"]["stopped_by"] == {"reason": "num_requests", "requests": 300, "limit": 300}
    assert "--num-requests 300: 150, 150 per worker" in budget_run["out"]
    # ended by the budget, long before -t 120s
    assert s["duration_s"] < 60


def test_summary_is_schema_2_with_the_run_record_and_the_server_environment(budget_run, sim):
    s = budget_run["summary"]
    jsonschema.Draft202012Validator(SCHEMA).validate(s)
    assert s["schema"] == 2
    run = s["run"]
    assert run["options"]["api_key"] == "***" and "sekrit-value" not in json.dumps(s)
    assert run["options"]["num_requests"] == 300 and run["options"]["output_len"] == "fixed:8"
    assert run["workers"] == 2 and run["seed"] == 7 and run["worker_seeds"] == [7, 8]
    assert isinstance(run["prompt_salt"], int)  # one salt, drawn on the master, shipped to both workers
    assert [c["name"] for c in run["user_classes"]] == ["StreamingChatUser"]
    assert run["tool"]["commit"] and len(run["tool"]["commit"]) == 40
    assert run["started_utc"] < run["ended_utc"] and run["locust"] and run["hosts"]
    assert run["tokenizer"]["hash"] == tokenizer_hash(run["tokenizer"]["name"]) and run["tokenizer"]["source"]
    env = s["server_env"]
    assert env["version"] == "0.32.0+sim" and env["model"] == s["model"] and env["max_model_len"] > 0
    assert env["cache_config"]["block_size"] == BLOCK_SIZE and env["errors"] == {}
    assert env["cache_config"]["enable_prefix_caching"] is False  # --no-enable-prefix-caching (the max-errors run: on)
    # the client block fill counted with the server's block size, variance beside the mean, per stage too
    fill = s["client_kv_block_fill"]
    assert fill["block_size"] == BLOCK_SIZE and fill["block_size_source"] == "server"
    assert 0 < fill["mean"] <= 1 and fill["var"] >= 0
    (stage,) = s["stages"]
    # one stage: its fill variance is the run's, from the same samples; each variance within the Bhatia-Davis bound
    # (max - mean)(mean - min) of its own samples, which E[x^2] (the mean not taken off) or a variance of the wrong
    # samples would break
    assert stage["client_kv_block_fill_var"] == pytest.approx(fill["var"], rel=1e-9)
    # (a run whose fill samples all coincide has a variance of exactly 0: CI saw one, so no "> 0" here)
    assert fill["var"] <= fill["mean"] * (1 - fill["mean"])
    kv_mean, kv_max, kv_var = stage["server_kv_usage_mean"], stage["server_kv_usage_max"], stage["server_kv_usage_var"]
    assert kv_max > 0 and 0 <= kv_var <= (kv_max - kv_mean) * kv_mean + 1e-12, (kv_mean, kv_max, kv_var)


def test_jsonl_has_one_line_per_request_and_reconciles_with_the_summary(budget_run):
    s, lines = budget_run["summary"], budget_run["lines"]
    assert len(lines) == 300
    assert len({r["request_id"] for r in lines}) == 300
    assert sorted({r["worker"] for r in lines}) == [0, 1]
    assert [sum(r["worker"] == w for r in lines) for w in (0, 1)] == [150, 150]
    assert sum(r["output_tokens"] for r in lines) == s["tokens"]["output"]
    assert sum(r["prompt_tokens"] for r in lines) == s["tokens"]["prompt"]
    assert all(r["ok"] and r["stage"] == "main" and r["user_class"] == "StreamingChatUser" for r in lines)
    # why each stopped, as the stream said: the length limit (8) or an end-of-sequence before it
    reasons = {r["finish_reason"] for r in lines}
    assert reasons <= {"length", "stop"} and "length" in reasons, reasons
    assert all(r["output_tokens"] == 8 for r in lines if r["finish_reason"] == "length")
    for key in ("ttft_ms", "e2e_ms", "tpot_ms"):
        values = np.array([r[key] for r in lines])
        for q, field in ((0.5, "p50"), (0.99, "p99")):
            exact = float(np.quantile(values, q, method="inverted_cdf"))
            assert s[key][field] == pytest.approx(exact, rel=0.02), (key, field)
    # the chunk offsets are the request's own timeline: the first is its TTFT, the last its TTFT + decode span
    for r in lines[:20]:
        assert r["chunk_offsets_ms"][0] == pytest.approx(r["ttft_ms"], abs=0.002)
        assert r["chunk_offsets_ms"][-1] - r["chunk_offsets_ms"][0] == pytest.approx(r["decode_span_ms"], abs=0.003)
        assert sum(r["chunk_tokens"]) == r["output_tokens"]


def test_vllm_bench_json_agrees_with_the_jsonl(budget_run):
    b, lines = budget_run["bench"], budget_run["lines"]
    assert b["num_prompts"] == b["completed"] == 300 and b["failed"] == 0
    assert b["total_output_tokens"] == sum(r["output_tokens"] for r in lines)
    assert b["ttfts"] == pytest.approx([r["ttft_ms"] / 1000 for r in lines])
    assert b["mean_e2el_ms"] == pytest.approx(float(np.mean([r["e2e_ms"] for r in lines])))
    # vLLM's TPOT: the decode time over the tokens after the first, per request
    tpot = [(r["e2e_ms"] - r["ttft_ms"]) / (r["output_tokens"] - 1) for r in lines]
    assert b["mean_tpot_ms"] == pytest.approx(float(np.mean(tpot)))
    assert b["max_concurrency"] == 8 and b["request_rate"] == "inf"


@pytest.mark.vllm
def test_vllm_bench_json_covers_every_field_vllm_bench_serve_writes(budget_run, sim, tmp_path):
    """Also the suite's one ``vllm bench serve`` run of the chat backend: vLLM's own client completes every request
    against the simulator (tests/server/sim/test_vllm_bench.py runs the completions backend)."""
    require(_vllm_missing(), VLLM)
    out, n, out_len = tmp_path / "vllm.json", 16, 8
    bench = Proc([str(ROOT / ".venv-vllm" / "bin" / "vllm"), "bench", "serve", "--backend", "openai-chat",
                  "--base-url", sim, "--endpoint", "/v1/chat/completions", "--model", budget_run["summary"]["model"],
                  "--tokenizer", str(ROOT / ".cache" / "tiny-deepseek"), "--dataset-name", "random",
                  "--random-input-len", "32", "--random-output-len", str(out_len), "--num-prompts", str(n),
                  "--max-concurrency", "8", "--ignore-eos", "--disable-tqdm", "--save-result", "--save-detailed",
                  "--result-dir", str(tmp_path), "--result-filename", out.name],
                 name="vllm-bench", env={"VLLM_CACHE_ROOT": str(tmp_path / "vllm-cache")})
    rc = bench.wait(240)
    assert rc == 0 and out.exists(), bench.output()[-3000:]
    theirs, ours = json.loads(out.read_text()), budget_run["bench"]
    assert theirs["completed"] == n and theirs["failed"] == 0, theirs.get("errors")
    assert theirs["total_output_tokens"] == n * out_len
    assert theirs["mean_ttft_ms"] > 0 and theirs["mean_itl_ms"] > 0
    assert sorted(set(theirs) - set(ours)) == []
    for key, value in theirs.items():
        if value is None or ours[key] is None:
            assert key in ("label", "request_goodput") or value == ours[key], key
            continue
        assert isinstance(ours[key], type(value)) or (isinstance(value, float) and isinstance(ours[key], int)), key
        if isinstance(value, list) and value and isinstance(value[0], list):  # itls: a list of floats per request
            assert all(isinstance(g, float) for gaps in ours[key] for g in gaps), key
    # the same simulator at the same concurrency (8) answered both: vLLM's per-token figures and ours agree (TPOT
    # 1.09 measured; TTFT counted into TPOT made it 1.39). Our ITL reads ~1.24 x theirs: 8 users' gaps on two
    # worker processes of a busy box against vLLM's one asyncio client
    assert ours["completed"] == 300
    ratio = {k: ours[f"mean_{k}_ms"] / theirs[f"mean_{k}_ms"] for k in ("tpot", "itl")}
    print(f"\nours / vllm bench serve: {ratio}")
    assert 0.8 < ratio["tpot"] < 1.25 and 0.67 < ratio["itl"] < 1.5, ratio


def _vllm_missing() -> str | None:
    from tests.vllm.engine import missing_reason

    return missing_reason()


def test_max_errors_stops_a_failing_run_with_the_reason(tmp_path):
    proc, host = _sim("--fault-rate", "1", "--fault-kinds", "500", "--enable-prefix-caching")
    summary = tmp_path / "s.json"
    with proc:
        run = Proc([LOCUST, "-f", "locustfile.py", "--headless", "-u", "2", "-r", "2", "-t", "60s", "--host", host,
                    "--max-errors", "5", "--llm-summary-json", str(summary), *LOAD, "StreamingChatUser"],
                   name="locust")
        rc = run.wait(90)
    s = json.loads(summary.read_text())
    assert rc == 1, run.output()[-2000:]  # failed requests: Locust's own exit code
    assert s["server_env"]["cache_config"]["enable_prefix_caching"] is True  # as the simulator was started
    stopped = s["run"]["stopped_by"]
    assert stopped["reason"] == "max_errors" and stopped["limit"] == 5 and stopped["errors"] >= 5
    assert s["requests"]["failed"] >= 5 and s["requests"]["ok"] == 0
    assert s["duration_s"] < 30
    assert "--max-errors 5:" in run.output()


def test_budget_split_is_exact():
    from users.budget import Budget, split

    assert split(300, 2) == [150, 150] and split(7, 3) == [3, 2, 2] and split(1, 3) == [1, 0, 0]
    assert sum(split(1001, 7)) == 1001
    done: list[int] = []
    b = Budget(2, done.append)
    assert b.claim() and b.claim() and not b.claim()
    b.finish()
    assert done == []
    b.finish()
    assert done == [2] and b.done
    assert Budget(0, done.append).done and done == [2, 0]


def test_effective_options_mask_secrets():
    from types import SimpleNamespace

    from telemetry.outputs.runrecord import effective_options, parse_cache_config

    o = effective_options(SimpleNamespace(api_key="abc", tokenizer="auto", num_requests=3, api_key_file=None))
    assert o == {"api_key": "***", "api_key_file": None, "num_requests": 3, "tokenizer": "auto"}
    page = ('# TYPE vllm:cache_config_info gauge\nvllm:cache_config_info{block_size="64",cache_dtype="fp8",'
            'enable_prefix_caching="False",gpu_memory_utilization="0.92",num_gpu_blocks="5120",swap_space="4"} 1.0\n')
    cc = parse_cache_config(page)
    assert cc == {"block_size": 64, "cache_dtype": "fp8", "num_gpu_blocks": 5120, "gpu_memory_utilization": 0.92,
                  "enable_prefix_caching": False, "other": {"swap_space": "4"}, "engines": 1,
                  "num_gpu_blocks_total": 5120}
    assert parse_cache_config("vllm:num_requests_running 1\n") is None


def test_client_block_fill_uses_the_block_size_and_keeps_the_variance():
    from telemetry.measure.recorder import Recorder

    rec = Recorder()
    rec.kv_block, rec.kv_block_source = 64, "server"
    rec.record_kv_fill("s", [(10, 6)])  # 16 tokens in one 64-token block
    rec.record_kv_fill("s", [(60, 4), (1, 0)])  # 64 + 1 tokens: a full block and a block with one token
    merged = Recorder()
    merged.merge(rec.take())
    f = merged.kv_fill["s"]
    ratios = [16 / 64, 65 / 128]
    assert f.samples == 2 and f.ratio_sum == pytest.approx(sum(ratios))
    assert f.sq_sum == pytest.approx(sum(r * r for r in ratios))
    assert (merged.kv_block, merged.kv_block_source) == (64, "server")
    fallback = Recorder()
    fallback.record_kv_fill("s", [(16, 1)])  # 17 tokens: two 16-token blocks
    assert fallback.kv_fill["s"].ratio_sum == pytest.approx(17 / 32) and fallback.kv_block_source == "fallback"


def test_server_quantiles_in_the_first_or_open_bucket_are_reported_as_the_bucket_only():
    from telemetry.attribution.histogram import CumulativeHistogram

    # vLLM's queue-time buckets start at 0.3 s: 90 requests queued ~35 ms, 8 in (0.3, 0.5], 2 above 1 s
    inf = float("inf")
    h = CumulativeHistogram.from_buckets({0.3: 90, 0.5: 98, 1.0: 98, inf: 100}, total_sum=90 * 0.035 + 8 * 0.4 + 2 * 2)
    q = h.to_q()
    assert q["p50"] is None and q["bucket"]["p50"] == [0.0, 300.0]  # not "152 ms" from inside (0, 300]
    assert q["p95"] == pytest.approx(300 + 200 * (95 - 90) / 8) and q["bucket"]["p95"] == [300.0, 500.0]
    assert q["p99"] is None and q["bucket"]["p99"] == [1000.0, None]
    assert q["mean"] == pytest.approx((90 * 0.035 + 8 * 0.4 + 2 * 2) / 100 * 1000)


GIB = 1024**3


def test_gpu_metrics_url_records_name_total_and_peak_memory(sim, tmp_path):
    """The server host's GPU exporter (server/gpu_exporter.py's metric names; this box has no GPU, so a stand-in
    serves them): memory used 1, 3, then 2 GiB — the summary holds the start, the 3 GiB peak and the total."""
    import http.server
    import threading

    served = [1, 3]

    class Exporter(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            used = served.pop(0) if served else 2
            body = (f'gpu_memory_used_bytes{{gpu="0",name="NVIDIA H200"}} {used * GIB}\n'
                    f'gpu_memory_total_bytes{{gpu="0",name="NVIDIA H200"}} {141 * GIB}\n').encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_a):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Exporter)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    summary = tmp_path / "s.json"
    try:
        run = Proc([LOCUST, "-f", "locustfile.py", "--headless", "-u", "1", "-r", "1", "-t", "4s", "--host", sim,
                    "--gpu-metrics-url", f"http://127.0.0.1:{httpd.server_address[1]}/metrics",
                    "--server-metrics-interval", "1", "--llm-summary-json", str(summary), *LOAD,
                    "StreamingChatUser"], name="locust")
        assert run.wait(60) == 0, run.output()[-2000:]
    finally:
        httpd.shutdown()
    s = json.loads(summary.read_text())
    jsonschema.Draft202012Validator(SCHEMA).validate(s)
    gpu = s["server_env"]["gpu"]
    assert gpu["scrapes"] >= 3 and gpu["scrape_failures"] == 0
    assert gpu["gpus"] == [{"gpu": "0", "name": "NVIDIA H200", "memory_total_bytes": 141 * GIB,
                            "memory_used_start_bytes": 1 * GIB, "memory_used_peak_bytes": 3 * GIB}]


def test_dcgm_exporter_metrics_parse():
    from telemetry.outputs.runrecord import parse_gpu_metrics

    page = ('DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-1",modelName="NVIDIA H100 80GB HBM3"} 1024\n'
            'DCGM_FI_DEV_FB_FREE{gpu="0",UUID="GPU-1",modelName="NVIDIA H100 80GB HBM3"} 80000\n')
    assert parse_gpu_metrics(page) == {"0": {"name": "NVIDIA H100 80GB HBM3", "used": 1024 * 1024**2,
                                             "free": 80000 * 1024**2, "total": 81024 * 1024**2, "energy_j": None}}


def test_num_requests_run_with_a_lost_worker_ends_when_the_survivor_is_done(sim, tmp_path):
    """A worker killed under --num-requests never says it is done: the master counts it out once Locust marks it
    missing, and the run ends when the survivor has sent its exact share, not at -t."""
    out_path = tmp_path / "s.json"
    args = ["--num-requests", "600", "--llm-summary-json", str(out_path)]
    with _master_and_two_workers(sim, *args) as (master, workers):
        start = time.monotonic()
        while "per worker" not in master.output() and time.monotonic() - start < 60:  # the quotas are out
            time.sleep(0.2)
        time.sleep(1.0)
        workers[0].signal(signal.SIGKILL)
        rc = master.wait(150)
        wall = time.monotonic() - start
        out = master.output()
    assert rc == 0, out[-3000:]
    s = json.loads(out_path.read_text())
    stopped = s["run"]["stopped_by"]
    print(f"lost worker under --num-requests 600: ended after {wall:.1f} s (-t 120 s), stopped_by {stopped}")
    assert stopped["reason"] == "num_requests" and stopped["limit"] == 600, stopped
    assert stopped["workers_lost"] == s["workers_lost"] and len(stopped["workers_lost"]) == 1, (stopped, s)
    assert stopped["requests"] == 300  # the survivor's share, exactly
    assert "was lost; its unsent share stays unsent" in out
    assert wall < 90, wall  # it did not wait for -t
