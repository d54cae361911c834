"""End-of-run sinks fed the final (merged) summary: console table, summary JSON, CSV files.

print(console_table(summary))
write_json(summary, "results/summary.json")
write_csv(summary, "results/run")   # results/run_llm_stats.csv, results/run_llm_stages.csv
"""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path

import orjson

from telemetry.metrics import BY_KEY, having, keys, reasoned_in, shown
from telemetry.slo import verdict_line

STAGE_TABLE: dict[str, int] = {"ttft": 17, "itl": 15, "tpot": 15}
"""Per-stage metrics in the console's stage table (registry key -> width of its p50/p99 column), in order."""
STAGES_CSV: dict[str, tuple[str, ...]] = {"ttft": ("p50", "p99"), "itl": ("p50", "p99"), "tpot": ("p50",),
                                          "e2e": ("p99",), "ttst": ("p50", "p99"), "ttfa": ("p50", "p99")}
"""Per-stage metrics given as ``<key>_<q>_ms`` columns of the stages CSV (registry key -> quantiles), in order."""

Q_COLUMNS = ("count", "mean", "p50", "p90", "p95", "p99", "max")


def _f(v, fmt: str = "{:.1f}") -> str:
    return "-" if v is None else fmt.format(v)


def engine_lines(server: dict) -> list[str]:
    """One line per engine when the server is a fleet (several targets or data-parallel engines)."""
    engines = server.get("engines") or []
    if len(engines) < 2:
        return []
    named = len({e.get("target") for e in engines}) > 1
    out = [f"  {len(engines)} engines, KV blocks {server.get('kv_blocks_total') or '?'}:"]
    for e in engines:
        kv, q = e["kv_cache_usage"], e["queue_time_ms"]
        who = (f"{e['target']}/" if named else "") + f"engine {e['engine']}"
        who += f" ({e['role']})" if e.get("role") else ""
        out.append(f"  {who}: finished {e['requests_finished']}, KV mean {_f(kv['mean'], '{:.1%}')} max "
                   f"{_f(kv['max'], '{:.1%}')}, waiting max {e['requests_waiting_max']}, queue p50/p99 "
                   f"{_f(q['p50'])}/{_f(q['p99'])} ms, preemptions {e['preemptions']}")
    return out


def console_table(s: dict) -> str:
    """The token-level summary people read at the end of a headless run."""
    lines = [
        f"LLM summary: {s['duration_s']:.1f} s, {s['workers']} worker(s), model {s['model'] or '?'} at {s['host']}",
        f"{'metric (ms)':<14}{'count':>9}{'p50':>10}{'p90':>10}{'p99':>10}{'mean':>10}{'max':>10}",
    ]
    for key in shown(keys("top"), reasoned_in(s)):
        m = BY_KEY[key]
        q = s[m.summary_key]
        lines.append(
            f"{m.label:<14}{q['count']:>9}" + "".join(f"{_f(q[c]):>10}" for c in ("p50", "p90", "p99", "mean", "max"))
        )
    t, r = s["tokens"], s["requests"]
    lines.append(f"tokens: output {t['output']} ({_f(t['output_per_s'])} tok/s), prompt {t['prompt']}, "
                 f"source {t['source']}, prompt mismatch {_f(t['prompt_mismatch_ratio'], '{:.2%}')}")
    errs = ", ".join(f"{k} {n}" for k, n in r["errors"].items())
    lines.append(f"requests: {r['total']} total, {r['ok']} ok, {r['failed']} failed" + (f" ({errs})" if errs else "")
                 + f"; goodput {_f(s['goodput_rps'], '{:.2f}')} req/s")
    server = s["server"]
    if server.get("scrapes"):
        kv = server["kv_cache_usage"]
        lines.append(
            f"server ({server['metric_names']}): KV usage mean {_f(kv['mean'], '{:.1%}')}"
            f" max {_f(kv['max'], '{:.1%}')}, waiting max {server['requests_waiting_max']},"
            f" preemptions {server['preemptions']}"
        )
        lines.extend(engine_lines(server))
    pc = s.get("prefix_cache") or {}
    if pc.get("hit_rate") is not None:
        share = pc.get("workload_share")
        lines.append(f"server prefix cache: hit rate {pc['hit_rate']:.1%}"
                     + (f" (the workload itself repeats {share:.1%})" if share is not None else ""))
    if pc.get("warning"):
        lines.append(f"WARNING: {pc['warning']}")
    if s["client_kv_block_fill"]["mean"] is not None:
        lines.append(f"client KV block fill (blocks of 16): mean {s['client_kv_block_fill']['mean']:.1%}")
    if _has_stage_table(s["stages"]):
        lines.extend(stage_table(s["stages"], s.get("saturation")))
    cap = s.get("capacity")
    if isinstance(cap, dict) and "status" in cap:  # a capacity search: its answer, not the whole run's SLO mix
        lines.append(capacity_line(cap))
    elif (slo_line := verdict_line(s["slo"])) is not None:
        lines.append(slo_line)
    if s.get("workers_lost"):
        lines.append(
            f"WARNING: worker(s) lost mid-run, numbers hold only what they reported: {', '.join(s['workers_lost'])}"
        )
    return "\n".join(lines)


def _ms(v) -> str:
    """A latency in ms with about three significant digits (0.42, 12.3, 412)."""
    if v is None:
        return "-"
    return f"{v:.2f}" if v < 10 else f"{v:.1f}" if v < 100 else f"{v:.0f}"


def _pair(q: dict | None) -> str:
    q = q or {}
    return f"{_ms(q.get('p50'))}/{_ms(q.get('p99'))}"


def _load(st: dict) -> str:
    if st.get("rate") is not None:
        return f"{st['rate']:g} req/s"
    return "-" if st.get("users") is None else f"{st['users']} users"


def _has_stage_table(stages: list[dict]) -> bool:
    """A shape ran (several stages, or one not called ``main``)."""
    return len(stages) > 1 or (len(stages) == 1 and stages[0]["name"] != "main")


STAGE_LINE2 = (*((f"{BY_KEY[k].label} p50/p99", w) for k, w in STAGE_TABLE.items()), ("client KV fill", 16),
               ("server KV mean/max", 20), ("preempt", 9), ("queue p50/p99", 15))
"""Second line of a stage row: (heading, width). Latencies in ms."""


def capacity_line(cap: dict) -> str:
    """``capacity: <statement>`` and, at the load found, goodput, output tok/s, per GPU and the cost."""
    figures = []
    if cap.get("goodput_rps") is not None:
        figures.append(f"goodput {cap['goodput_rps']:.2f} req/s")
    if cap.get("output_per_s") is not None:
        figures.append(f"output {cap['output_per_s']:.0f} tok/s")
    if cap.get("output_per_s_per_gpu") is not None:
        figures.append(f"{cap['output_per_s_per_gpu']:.0f} tok/s per GPU")
    if cap.get("usd_per_million_output_tokens") is not None:
        figures.append(f"${cap['usd_per_million_output_tokens']:.2f} per million output tokens")
    return f"capacity: {cap['statement']}" + (f" — at it: {', '.join(figures)}" if figures else "")


def stage_table(stages: list[dict], saturation: dict | None) -> list[str]:
    """Two lines per stage (load and throughput; latency and KV), full stage names, then the saturation verdict.

    Column widths follow the longest stage name and input SPEC, so nothing is cut off. Warm-up stages are
    shown with a ``*``: their requests are left out of the run's totals and of the verdict.
    """
    names = [st["name"] + (" *" if st.get("warmup") else "") for st in stages]
    inputs = [str(st.get("input_len") or "-") for st in stages]
    wn = max(len("stage"), *map(len, names)) + 2
    wi = max(len("input"), *map(len, inputs)) + 2
    rate_mode = any(st.get("rate") is not None for st in stages)
    second = [(h, w) for h, w in STAGE_LINE2 if rate_mode or h != "queue p50/p99"]
    out = [
        "per stage (latencies in ms; each stage on two lines"
        + ("; * = warm-up, left out of the totals" if any(st.get("warmup") for st in stages) else "")
        + ")",
        f"{'stage':<{wn}}{'load':<14}{'input':<{wi}}{'requests':>9}{'prompt tok':>12}{'out tok/s':>11}",
        "    " + "".join(f"{h:>{w}}" for h, w in second),
    ]
    for st, name, inp in zip(stages, names, inputs, strict=True):
        out.append(f"{name:<{wn}}{_load(st):<14}{inp:<{wi}}{st['requests']:>9}"
                   f"{_f(st.get('prompt_tokens_mean')):>12}{_f(st.get('output_per_s')):>11}")
        kv = f"{_f(st.get('server_kv_usage_mean'), '{:.1%}')}/{_f(st.get('server_kv_usage_max'), '{:.1%}')}"
        values = {
            **{f"{BY_KEY[k].label} p50/p99": _pair(st.get(BY_KEY[k].summary_key)) for k in STAGE_TABLE},
            "client KV fill": _f(st.get("client_kv_block_fill"), "{:.1%}"),
            "server KV mean/max": kv,
            "preempt": _f(st.get("preemptions"), "{}"),
            "queue p50/p99": _pair(st.get("client_queue_ms")) if st.get("rate") is not None else "-",
        }
        out.append("    " + "".join(f"{values[h]:>{w}}" for h, w in second))
    if saturation:
        out.append(f"saturation: {saturation.get('stage') or 'none'} ({saturation.get('reason', '')})")
    return out


def _parent(path: str) -> None:
    d = os.path.dirname(path)
    if d:
        os.makedirs(d, exist_ok=True)


def json_bytes(summary: dict) -> bytes:
    """The summary as the JSON file holds it (the web UI's download serves the same bytes)."""
    return orjson.dumps(summary, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY)


def write_json(summary: dict, path: str) -> None:
    _parent(path)
    Path(path).write_bytes(json_bytes(summary))


def stats_rows(summary: dict) -> list[list]:
    """The rows of ``PREFIX_llm_stats.csv``: one per metric, overall and per stage (header first)."""
    rows = [["scope", "metric", *(f"{c}_ms" if c != "count" else c for c in Q_COLUMNS)]]
    for m in having("top"):
        rows.append(["all", m.key, *(summary[m.summary_key][c] for c in Q_COLUMNS)])
    for st in summary["stages"]:
        for m in having("per_stage"):
            rows.append([st["name"], m.key, *(st[m.summary_key][c] for c in Q_COLUMNS)])
    return rows


def stages_rows(summary: dict) -> list[list]:
    """The rows of ``PREFIX_llm_stages.csv``: one per stage (header first), ``<key>_<q>_ms`` columns for each
    metric of :data:`STAGES_CSV` and its quantiles."""
    cols = ("name", "users", "rate", "input_len", "start_s", "end_s", "requests", "output_per_s",
            "prompt_tokens_mean", "client_kv_block_fill", "server_kv_usage_mean", "server_kv_usage_max",
            "preemptions")
    quantiles = [(BY_KEY[k].summary_key, q) for k, qs in STAGES_CSV.items() for q in qs]
    rows = [[*cols, *(f"{key.removesuffix('_ms')}_{q}_ms" for key, q in quantiles)]]
    for st in summary["stages"]:
        rows.append([*(st[c] for c in cols), *(st[key][q] for key, q in quantiles)])
    return rows


def csv_text(rows: list[list]) -> str:
    """Rows as CSV text (what the files hold; the web UI's downloads serve it)."""
    buf = io.StringIO()
    csv.writer(buf).writerows(rows)
    return buf.getvalue()


def write_csv(summary: dict, prefix: str) -> tuple[str, str]:
    """``PREFIX_llm_stats.csv`` (:func:`stats_rows`) and ``PREFIX_llm_stages.csv`` (:func:`stages_rows`)."""
    stats_path, stages_path = f"{prefix}_llm_stats.csv", f"{prefix}_llm_stages.csv"
    _parent(stats_path)
    for path, rows in ((stats_path, stats_rows(summary)), (stages_path, stages_rows(summary))):
        with open(path, "w", newline="") as fh:
            csv.writer(fh).writerows(rows)
    return stats_path, stages_path
