"""End-of-run sinks fed the final (merged) summary: console table, summary JSON, CSV files.

print(console_table(summary))
write_json(summary, "results/summary.json")
write_csv(summary, "results/run")   # results/run_llm_stats.csv, results/run_llm_stages.csv
"""

from __future__ import annotations

import csv
import os
from pathlib import Path

import orjson

METRIC_ROWS = (("TTFT", "ttft_ms"), ("ITL", "itl_ms"), ("TPOT", "tpot_ms"), ("E2E", "e2e_ms"),
               ("inter-chunk", "inter_chunk_ms"), ("decode span", "decode_span_ms"))  # fmt: skip
Q_COLUMNS = ("count", "mean", "p50", "p90", "p95", "p99", "max")


def _f(v, fmt: str = "{:.1f}") -> str:
    return "-" if v is None else fmt.format(v)


def console_table(s: dict) -> str:
    """The token-level summary people read at the end of a headless run."""
    lines = [
        f"LLM summary: {s['duration_s']:.1f} s, {s['workers']} worker(s), model {s['model'] or '?'} at {s['host']}",
        f"{'metric (ms)':<14}{'count':>9}{'p50':>10}{'p90':>10}{'p99':>10}{'mean':>10}{'max':>10}",
    ]
    for label, key in METRIC_ROWS:
        q = s[key]
        lines.append(
            f"{label:<14}{q['count']:>9}" + "".join(f"{_f(q[c]):>10}" for c in ("p50", "p90", "p99", "mean", "max"))
        )
    t, r = s["tokens"], s["requests"]
    lines.append(f"tokens: output {t['output']} ({_f(t['output_per_s'])} tok/s), prompt {t['prompt']}, "
                 f"source {t['source']}, prompt mismatch {_f(t['prompt_mismatch_ratio'], '{:.2%}')}")  # fmt: skip
    errs = ", ".join(f"{k} {n}" for k, n in r["errors"].items())
    lines.append(f"requests: {r['total']} total, {r['ok']} ok, {r['failed']} failed" + (f" ({errs})" if errs else "")
                 + f"; goodput {_f(s['goodput_rps'], '{:.2f}')} req/s")  # fmt: skip
    server = s["server"]
    if server.get("scrapes"):
        kv = server["kv_cache_usage"]
        lines.append(
            f"server ({server['metric_names']}): KV usage mean {_f(kv['mean'], '{:.1%}')}"
            f" max {_f(kv['max'], '{:.1%}')}, waiting max {server['requests_waiting_max']},"
            f" preemptions {server['preemptions']}"
        )
    if s["client_kv_block_fill"]["mean"] is not None:
        lines.append(f"client KV block fill (blocks of 16): mean {s['client_kv_block_fill']['mean']:.1%}")
    if len(s["stages"]) > 1:
        lines.append(f"{'stage':<22}{'users':>6}{'rate':>7}{'reqs':>7}{'tok/s':>9}{'TTFT p50':>10}{'TTFT p99':>10}"
                     f"{'ITL p50':>9}{'ITL p99':>9}{'TPOT p50':>10}{'E2E p99':>10}{'KV srv':>8}")  # fmt: skip
        for st in s["stages"]:
            lines.append(
                f"{st['name'][:21]:<22}{_f(st['users'], '{}'):>6}{_f(st['rate'], '{:g}'):>7}{st['requests']:>7}"
                f"{_f(st['output_per_s']):>9}{_f(st['ttft_ms']['p50']):>10}{_f(st['ttft_ms']['p99']):>10}"
                f"{_f(st['itl_ms']['p50']):>9}{_f(st['itl_ms']['p99']):>9}{_f(st['tpot_ms']['p50']):>10}"
                f"{_f(st['e2e_ms']['p99']):>10}{_f(st['server_kv_usage_mean'], '{:.0%}'):>8}"
            )
    if s["slo"]["checks"]:
        verdict = "passed" if s["slo"]["passed"] else "FAILED"
        parts = ", ".join(
            f"{c['name']} {_f(c['value'], '{:.4g}')} <= {c['threshold']:g}: {'ok' if c['passed'] else 'no'}"
            for c in s["slo"]["checks"]
        )
        lines.append(f"SLO {verdict}: {parts}")
    if s.get("workers_lost"):
        lines.append(
            f"WARNING: worker(s) lost mid-run, numbers hold only what they reported: {', '.join(s['workers_lost'])}"
        )
    return "\n".join(lines)


def _parent(path: str) -> None:
    d = os.path.dirname(path)
    if d:
        os.makedirs(d, exist_ok=True)


def write_json(summary: dict, path: str) -> None:
    _parent(path)
    Path(path).write_bytes(orjson.dumps(summary, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY))


def write_csv(summary: dict, prefix: str) -> tuple[str, str]:
    """``PREFIX_llm_stats.csv`` (one row per metric, overall and per stage) and ``PREFIX_llm_stages.csv``."""
    stats_path, stages_path = f"{prefix}_llm_stats.csv", f"{prefix}_llm_stages.csv"
    _parent(stats_path)
    with open(stats_path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["scope", "metric", *(f"{c}_ms" if c != "count" else c for c in Q_COLUMNS)])
        for _label, key in METRIC_ROWS:
            w.writerow(["all", key.removesuffix("_ms"), *(summary[key][c] for c in Q_COLUMNS)])
        for st in summary["stages"]:
            for key in ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms", "client_queue_ms"):
                w.writerow([st["name"], key.removesuffix("_ms"), *(st[key][c] for c in Q_COLUMNS)])
    with open(stages_path, "w", newline="") as fh:
        w = csv.writer(fh)
        cols = ("name", "users", "rate", "input_len", "start_s", "end_s", "requests", "output_per_s",
                "prompt_tokens_mean", "client_kv_block_fill", "server_kv_usage_mean", "server_kv_usage_max",
                "preemptions")  # fmt: skip
        w.writerow([*cols, "ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p99_ms", "tpot_p50_ms", "e2e_p99_ms"])
        for st in summary["stages"]:
            w.writerow([*(st[c] for c in cols), st["ttft_ms"]["p50"], st["ttft_ms"]["p99"], st["itl_ms"]["p50"],
                        st["itl_ms"]["p99"], st["tpot_ms"]["p50"], st["e2e_ms"]["p99"]])  # fmt: skip
    return stats_path, stages_path
