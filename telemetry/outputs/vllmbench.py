"""``--vllm-bench-json PATH``: the run as ``vllm bench serve --save-result --save-detailed`` writes it (vLLM 0.32,
``vllm/benchmarks/serve.py``), so scripts and dashboards built for vLLM's benchmark read ours.

Built at the end of the run from the per-request records (telemetry/outputs/requestlog.py), with vLLM's definitions, not
ours, where they differ:

- ``itls`` are the gaps between consecutive token-bearing chunks (vLLM appends one per chunk), in seconds;
  ``mean/median/std/p99_itl_ms`` are over all of them together;
- TPOT is ``(latency - ttft) / (output_len - 1)`` over the successful requests with more than one output token;
- failed requests count in ``failed`` with output length 0 and are left out of every latency figure;
- ``duration`` is the run's wall time; throughputs are per second of it; ``request_goodput`` is null (vLLM writes
  null without ``--goodput``), ``request_rate`` is ``"inf"`` in a closed loop and ``--arrival-rate`` otherwise,
  ``max_concurrency`` the peak user count;
- ``start_times`` are UTC epoch seconds (vLLM's are ``perf_counter`` seconds: only differences mean anything in
  either); ``generated_texts`` are empty strings (the text is not kept); ``rtfx`` (audio seconds per second) is 0.

    write_vllm_bench(summary, records, options, path)
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import numpy as np

from telemetry.metrics import BY_KEY

TTFT, E2E, QUEUE = (BY_KEY[k].summary_key for k in ("ttft", "e2e", "client_queue"))
"""The request log's keys this reads (``<key>_ms`` of the registry's per-request metrics)."""
PERCENTILES = (99,)
"""vLLM's default ``--metric-percentiles``."""


def _stats(name: str, values_s: list[float]) -> dict:
    """vLLM's ``process_one_metric``: mean/median/std/pNN in ms, 0 for an empty list (``np.mean(values or 0)``)."""
    v = values_s or 0
    out = {f"mean_{name}_ms": float(np.mean(v)) * 1000, f"median_{name}_ms": float(np.median(v)) * 1000,
           f"std_{name}_ms": float(np.std(v)) * 1000}
    for p in PERCENTILES:
        out[f"p{p}_{name}_ms"] = float(np.percentile(v, p)) * 1000
    return out


def _peaks(records: list[dict]) -> tuple[float, int]:
    """vLLM's ``max_output_tokens_per_s`` and ``max_concurrent_requests``: over whole seconds from the first
    successful start, the most chunk arrivals (vLLM counts one per chunk) and the most requests in flight."""
    ok = [r for r in records if r["ok"]]
    if not ok:
        return 0.0, 0
    t0 = min(r["start_unix_s"] for r in ok)
    end = max(r["start_unix_s"] + r[E2E] / 1000 for r in ok)
    n = int(np.ceil(end - t0)) + 1
    tokens, conc = np.zeros(n), np.zeros(n)
    for r in ok:
        start = r["start_unix_s"] - t0
        for off in r["chunk_offsets_ms"]:
            b = int(start + off / 1000)
            if 0 <= b < n:
                tokens[b] += 1
        conc[int(start) : int(start + r[E2E] / 1000) + 1] += 1
    return float(tokens.max()), int(conc.max())


def vllm_bench_result(summary: dict, records: list[dict], options=None) -> dict:
    ok = [r for r in records if r["ok"]]
    ttfts = [r[TTFT] / 1000 if r[TTFT] is not None else None for r in records]
    itls = [(np.diff(r["chunk_offsets_ms"]) / 1000).tolist() if r["ok"] else [] for r in records]
    out_lens = [r["output_tokens"] if r["ok"] else 0 for r in records]
    duration = float(summary.get("duration_s") or 0.0)
    total_in = sum(r["prompt_tokens"] for r in ok)
    total_out = sum(out_lens)
    tpots = [(r[E2E] - r[TTFT]) / 1000 / (r["output_tokens"] - 1)
             for r in ok if r["output_tokens"] > 1 and r[TTFT] is not None]
    rate = getattr(options, "arrival_rate", None) if options is not None else None
    stages = summary.get("stages") or []
    users = [s.get("users") for s in stages if isinstance(s.get("users"), int)]
    peak_tokens, peak_requests = _peaks(records)
    per = lambda x: x / duration if duration > 0 else 0.0  # noqa: E731
    result = {
        "date": datetime.now().strftime("%Y%m%d-%H%M%S"),
        "endpoint_type": "openai-chat" if any("chat" in r["name"] for r in records) else "openai",
        "backend": "openai-chat" if any("chat" in r["name"] for r in records) else "openai",
        "label": None,
        "model_id": summary.get("model") or "",
        "tokenizer_id": ((summary.get("run") or {}).get("tokenizer") or {}).get("name"),
        "num_prompts": len(records),
        "request_rate": float(rate) if rate else "inf",
        "burstiness": 1.0,
        "max_concurrency": max(users) if users else None,
        "duration": duration,
        "completed": len(ok),
        "failed": len(records) - len(ok),
        "total_input_tokens": total_in,
        "total_output_tokens": total_out,
        "request_throughput": per(len(ok)),
        "request_goodput": None,
        "output_throughput": per(total_out),
        "total_token_throughput": per(total_in + total_out),
        "input_lens": [r["prompt_tokens"] for r in records],
        "output_lens": out_lens,
        "ttfts": [t if t is not None else 0.0 for t in ttfts],
        "itls": itls,
        "latencies": [r[E2E] / 1000 if r["ok"] else 0.0 for r in records],
        "start_times": [r["start_unix_s"] for r in records],
        "queue_times": [r[QUEUE] / 1000 for r in records],
        "generated_texts": ["" for _ in records],
        "max_output_tokens_per_s": peak_tokens,
        "max_concurrent_requests": peak_requests,
        "rtfx": 0.0,
        "errors": ["" if r["ok"] else f"{r['error_kind']}: {r['error_message'] or ''}" for r in records],
    }
    result.update(_stats("ttft", [t for t, r in zip(ttfts, records, strict=True) if r["ok"] and t is not None]))
    result.update(_stats("tpot", tpots))
    result.update(_stats("itl", [g for gaps in itls for g in gaps]))
    result.update(_stats("e2el", [r[E2E] / 1000 for r in ok]))
    return result


def write_vllm_bench(summary: dict, records: list[dict], options, path: str | Path) -> None:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(vllm_bench_result(summary, records, options)))
