"""Synthetic summaries (docs/summary.schema.json plus timeseries / histograms / attribution extras)."""

from __future__ import annotations

import copy
import math

import numpy as np


def q(p50: float, p99: float, count: int = 100) -> dict:
    return {"count": count, "mean": (p50 * 3 + p99) / 4, "p50": p50, "p90": p50 + (p99 - p50) * 0.5,
            "p95": p50 + (p99 - p50) * 0.7, "p99": p99, "max": p99 * 1.2}


def _hist(rng: np.random.Generator, median_ms: float, sigma: float, n: int) -> dict:
    """Telemetry's form: log-spaced bins (20 per decade) in ms."""
    values = rng.lognormal(math.log(median_ms), sigma, n)
    lo, hi = math.floor(math.log10(values.min()) * 20) / 20, math.ceil(math.log10(values.max()) * 20) / 20
    edges = np.power(10.0, np.arange(lo, hi + 0.05, 0.05))
    counts = np.histogram(values, bins=edges)[0]
    return {"edges_ms": edges.tolist(), "counts": counts.tolist(), "count": n}


def sweep_summary(seed: int = 1) -> dict:
    rng = np.random.default_rng(seed)
    users = [1, 2, 4, 8, 16, 32]
    stages, t = [], 0.0
    for u in users:
        sat = max(0.0, u - 16) / 16
        stages.append({
            "name": f"users={u}", "users": u, "rate": None, "input_len": "fixed:512", "start_s": t, "end_s": t + 30,
            "requests": int(u * 30 / (1.5 + sat * 2)), "output_per_s": 120.0 * u / (1 + u / 14) * (1 - 0.1 * sat),
            "prompt_tokens_mean": 512.0, "client_queue_ms": q(0.1, 0.4),
            "ttft_ms": q(60 + 8 * u + 900 * sat, 110 + 14 * u + 2600 * sat), "itl_ms": q(8 + 0.4 * u, 12 + 1.1 * u),
            "tpot_ms": q(8.5 + 0.4 * u, 10 + 0.8 * u), "e2e_ms": q(2000 + 120 * u, 2600 + 200 * u),
            "client_kv_block_fill": 0.96, "server_kv_usage_mean": min(0.99, 0.03 * u),
            "server_kv_usage_max": min(0.99, 0.03 * u + 0.045), "preemptions": int(40 * sat),
        })
        t += 30
    series = []
    for i in range(int(t // 2)):
        tt = i * 2.0
        u = users[min(int(tt // 30), len(users) - 1)]
        kv = min(0.99, 0.03 * u + rng.uniform(0, 0.02))
        series.append({"t": tt, "kv_cache_usage": kv, "requests_waiting": max(0, u - 16) + int(rng.integers(0, 2)),
                       "requests_running": min(u, 16), "preemptions_total": 0, "hist": {},
                       "metric_names": "vllm-v1"})
    windows = []
    for i in range(int(t // 10)):
        u = users[min(i // 3, len(users) - 1)]
        spike = i == 16
        windows.append({"index": i, "start_s": i * 10.0, "end_s": i * 10.0 + 10, "requests": 4 * u,
                        "ttft_p50_ms": 60 + 8 * u, "ttft_p99_ms": (110 + 14 * u) * (3.1 if spike else 1.0),
                        "itl_p50_ms": 8 + 0.4 * u, "itl_p99_ms": 12 + 1.1 * u, "running_median": min(u, 16),
                        "waiting_max": max(0, u - 16) + (41 if spike else 0), "kv_usage_max": 0.99 if spike else 0.5,
                        "preemptions": 12 if spike else 0})
    ttft_all = q(180.0, 2900.0, 1500)
    return {
        "schema": 1, "duration_s": t, "workers": 2, "model": "deepseek-v2-lite", "host": "http://127.0.0.1:8000",
        "requests": {"total": 1520, "ok": 1500, "failed": 20, "errors": {"timeout": 12, "http_5xx": 8}},
        "tokens": {"prompt": 768000, "output": 384000, "output_per_s": 2133.3, "source": "usage",
                   "prompt_mismatch_ratio": 0.0},
        "ttft_ms": ttft_all, "itl_ms": q(11.0, 40.0, 380000), "inter_chunk_ms": q(11.0, 40.0, 380000),
        "tpot_ms": q(11.5, 30.0, 1500), "e2e_ms": q(3100.0, 8800.0, 1500), "decode_span_ms": q(2900.0, 6000.0, 1500),
        "goodput_rps": 7.4,
        "slo": {"passed": False, "checks": [
            {"name": "ttft_p99_ms", "threshold": 800.0, "value": 2900.0, "passed": False},
            {"name": "itl_p95_ms", "threshold": 120.0, "value": 31.0, "passed": True}]},
        "stages": stages,
        "saturation": {"stage": "users=16", "reason": "throughput gain < 10 % while TTFT p99 rose 2.1×"},
        "server": {"kv_cache_usage": {"mean": 0.41, "max": 0.99}, "requests_waiting_max": 18, "preemptions": 40,
                   "metric_names": "vllm-v1"},
        "client_kv_block_fill": {"mean": 0.96},
        "timeseries": {"window_s": 10.0, "server": series, "client": [
            {"start_s": w["start_s"], "end_s": w["end_s"], "requests": w["requests"], "errors": 0,
             "output_tokens": w["requests"] * 256, "output_per_s": w["requests"] * 25.6} for w in windows]},
        "histograms": {
            "ttft": _hist(rng, 180.0, 0.9, 1500),
            "itl": _hist(rng, 11.0, 0.4, 20000),
            "tpot": _hist(rng, 11.5, 0.3, 1500),
            "e2e": _hist(rng, 3100.0, 0.4, 1500),
        },
        "attribution": {
            "window_s": 10.0,
            "spikes": [{"start_s": 160.0, "end_s": 170.0, "metric": "ttft_p99_ms", "ratio": 3.1,
                        "category": "preemption",
                        "server": {"waiting_max": 41, "kv_usage_max": 0.99, "preemptions": 12},
                        "cause": "TTFT p99 3.1× at t=160–170s with 41 waiting, KV 0.99, 12 preemptions → preemption"}],
            "batching_failure": {"verdict": False, "flagged_windows": [],
                                 "baseline": {"windows": [0, 1, 2], "p99_ms": 124.0, "batch_size_median": 1}},
            "decomposition": {
                "ttft_client_ms": ttft_all, "ttft_server_ms": q(150.0, 2700.0, 1520), "queue_ms": q(40.0, 2200.0, 1520),
                "prefill_ms": q(90.0, 300.0, 1520), "decode_itl_server_ms": q(10.5, 36.0, 380000),
                "itl_client_ms": q(11.0, 40.0, 380000),
                "remainder_ms": {"network_client": 28.0, "server_other": 20.0},
                "statement": "client TTFT mean 860 ms = server queue 580 + prefill 142 + other server 20 "
                             "+ network & client 28 ms"},
            "windows": windows,
        },
    }


def single_stage_no_server() -> dict:
    s = sweep_summary()
    s = copy.deepcopy(s)
    s["stages"] = [s["stages"][3] | {"name": "main"}]
    s["saturation"] = {"stage": None, "reason": "one stage"}
    s["server"] = {"kv_cache_usage": {"mean": None, "max": None}, "requests_waiting_max": None, "preemptions": None,
                   "metric_names": "none"}
    s["timeseries"] = {"window_s": 10.0, "client": [], "server": []}
    s["slo"] = {"passed": True, "checks": []}
    del s["attribution"]
    return s
