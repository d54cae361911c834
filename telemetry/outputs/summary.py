"""Builds the summary (docs/summary.schema.json, plus ``timeseries`` and ``histograms``) from the view's merged state.

Every number here comes from the merged recorder, the master's stage history and the scraped
server series, so it is the same whatever the number of workers. Quantile objects are
``{"count", "mean", "p50", "p90", "p95", "p99", "max"}`` in milliseconds; an empty one has
``count`` 0 and ``None`` elsewhere.

    summary = build_summary(merger.view(...), hooks)   # a RunView, and the sections to add (run/hooks.py, optional)
"""

from __future__ import annotations

import numpy as np

from run.hooks import SummaryHooks
from telemetry.measure.recorder import FINE_METRICS, Cell, Recorder, TurnStats
from telemetry.measure.sketch import LogSketch
from telemetry.measure.view import RunView
from telemetry.metrics import having
from telemetry.outputs.fleet import counter_delta, engine_entries, fleet_totals
from telemetry.outputs.prefix_cache import section as prefix_cache_section
from telemetry.outputs.prefix_cache import workload_share

SCHEMA = 2
Q_FIELDS = (("p50", 0.5), ("p90", 0.9), ("p95", 0.95), ("p99", 0.99))


def q_ms(s: LogSketch) -> dict:
    """A sketch (seconds) as a Q object in milliseconds."""
    if s.count == 0:
        return {"count": 0, "mean": None, "p50": None, "p90": None, "p95": None, "p99": None, "max": None}
    out = {"count": s.count, "mean": s.sum / s.count * 1000.0}
    for name, q in Q_FIELDS:
        out[name] = s.quantile(q) * 1000.0
    out["max"] = s.max * 1000.0
    return out


def _counts(cells: list[Cell]) -> tuple[int, int, dict[str, int]]:
    total = ok = 0
    errors: dict[str, int] = {}
    for c in cells:
        for outcome, n in c.outcomes.items():
            total += n
            if outcome == "ok":
                ok += n
            else:
                errors[outcome] = errors.get(outcome, 0) + n
    return total, ok, dict(sorted(errors.items()))


def _mean(values: list[float]) -> float | None:
    return float(np.mean(values)) if values else None


def _var(total: float, sq_total: float, n: int) -> float | None:
    """Population variance from a sum and a sum of squares (None without samples; never below 0 from rounding)."""
    if not n:
        return None
    m = total / n
    return max(0.0, sq_total / n - m * m)


def _stage_entry(view: RunView, stage, start_s: float, end_s: float) -> dict:
    cells = view.merged.select(stage=stage.name)
    total, _ok, _err = _counts(cells)
    prompt_tokens = sum(c.prompt_tokens for c in cells)
    prompts = sum(c.prompts for c in cells)
    span = end_s - start_s
    kv = view.merged.kv_fill.get(stage.name)
    series = view.server_series
    kv_usage = view.server_kv_usages(start_s, end_s)
    options = view.options
    users = stage.users if stage.users is not None else getattr(options, "num_users", None)
    input_len = stage.input_len if stage.input_len is not None else getattr(options, "input_len", None)
    preempt = counter_delta(series, "preemptions_total", start_s, end_s)
    queries = counter_delta(series, "prefix_cache_queries_total", start_s, end_s)
    hits = counter_delta(series, "prefix_cache_hits_total", start_s, end_s)
    return {
        "name": stage.name,
        "users": users,
        "rate": stage.rate,
        "input_len": input_len,
        "start_s": start_s,
        "end_s": end_s,
        "warmup": bool(getattr(stage, "warmup", False)),
        "requests": total,
        "output_per_s": view.delivered_tokens(start_s, end_s) / span if span > 0 else None,
        "prompt_tokens_mean": prompt_tokens / prompts if prompts else None,
        **{m.summary_key: q_ms(Recorder.merged_sketch(cells, m.key)) for m in having("per_stage")},
        "client_kv_block_fill": view.client_kv_fill_of(stage.name),
        "client_kv_block_fill_var": _var(kv.ratio_sum, kv.sq_sum, kv.samples) if kv else None,
        "server_kv_usage_mean": _mean(kv_usage),
        "server_kv_usage_var": _var(sum(kv_usage), sum(x * x for x in kv_usage), len(kv_usage)),
        "server_kv_usage_max": max(kv_usage) if kv_usage else None,
        "preemptions": int(preempt) if preempt is not None else None,
        "prefix_cache_hit_rate": hits / queries if queries and hits is not None else None,
    }


def _turns(view: RunView, warmup: set[str]) -> list[dict]:
    """Per turn index of the conversations (``--turns``), warm-up stages left out: requests, TTFT, mean prompt
    tokens; [] without conversations."""
    turns: dict[int, TurnStats] = {}
    for (stage, i), t in view.merged.turns.items():
        if stage not in warmup:
            turns.setdefault(i, TurnStats()).merge(t)
    return [
        {"turn": i, "requests": t.requests, "ttft_ms": q_ms(t.ttft),
         "prompt_tokens_mean": t.prompt_tokens / t.ok if t.ok else None}
        for i, t in sorted(turns.items())
    ]


def _server_section(view: RunView) -> dict:
    """The whole server (the fleet: its targets' engines added up, KV usage their mean), then each target and
    engine (telemetry/outputs/fleet.py)."""
    series = view.server_series
    kv = [s["kv_cache_usage"] for s in series if s.get("kv_cache_usage") is not None]
    waiting = [s["requests_waiting"] for s in series if s.get("requests_waiting") is not None]
    end = series[-1]["t"] if series else 0.0
    start = series[0]["t"] if series else 0.0

    def delta(field: str) -> int | None:
        d = counter_delta(series, field, start, end)
        return int(d) if d is not None else None

    queries, hits = delta("prefix_cache_queries_total"), delta("prefix_cache_hits_total")
    engines = engine_entries(series)
    return {
        "kv_cache_usage": {"mean": _mean(kv), "max": max(kv) if kv else None},
        "requests_waiting_max": int(max(waiting)) if waiting else None,
        "preemptions": delta("preemptions_total"),
        "metric_names": view.scrape_metric_names,
        "scrapes": view.scrapes,
        "scrape_failures": view.scrape_failures,
        "requests_succeeded": delta("request_success_total"),
        "prompt_tokens": delta("prompt_tokens_total"),
        "generation_tokens": delta("generation_tokens_total"),
        "prefix_cache_hit_rate": hits / queries if queries and hits is not None else None,
        **fleet_totals(engines),
        "targets": list(view.server_targets),
        "engines": engines,
    }


HIST_BINS = 40
"""Most bins of a summary histogram (``histograms``): runs of whole sketch buckets over the data's own range."""


def _histograms(cells: list[Cell], metrics: tuple[str, ...], max_bins: int = HIST_BINS) -> dict:
    """Latency distributions for plotting: counts in at most ``max_bins`` bins (edges in ms) over the data's own
    range (min to max), each bin a run of whole sketch buckets — a narrow distribution keeps its shape instead of
    falling into one or two fixed log bins. Per-request metrics come from the fine sketches (0.2 % buckets)."""
    out = {}
    for m in metrics:
        s = Recorder.merged_fine(cells, m) if m in FINE_METRICS else Recorder.merged_sketch(cells, m)
        edges, counts = s.bins(max_bins)
        if s.count == 0 or edges.size < 2:
            out[m] = {"edges_ms": [], "counts": [], "count": s.count}
            continue
        out[m] = {"edges_ms": (edges * 1000.0).tolist(), "counts": counts.astype(np.int64).tolist(), "count": s.count}
    return out


def timeseries(view: RunView, window_s: float | None = None) -> dict:
    """The summary's ``timeseries``: client windows of ``window_s`` (default ``--attribution-window``) and the
    server's scrapes; the live charts pass a shorter window early in a run."""
    window_s = window_s or view.attribution_window
    windows = []
    for w in view.windows(window_s, fold_tail=True):
        span = w.end_s - w.start_s
        windows.append({
            "start_s": w.start_s,
            "end_s": w.end_s,
            "requests": w.requests,
            "errors": w.errors,
            "output_tokens": w.output_tokens,
            "output_per_s": w.output_tokens / span if span > 0 else None,
            **{f"{m}_ms": q_ms(s) for m, s in w.sketches.items()},
        })
    return {"window_s": window_s, "client": windows, "server": [_lean(d) for d in view.server_series]}


def _lean(sample: dict) -> dict:
    """A scrape as the timeseries keeps it: each engine's gauges and counters (its histograms and cache config are
    read into ``server.engines``, not repeated in every sample)."""
    engines = sample.get("engines")
    if not engines:
        return sample
    return {**sample, "engines": {k: {f: v for f, v in e.items() if f not in ("hist", "cache_config")}
                                  for k, e in engines.items()}}


def build_summary(view: RunView, hooks: SummaryHooks | None = None) -> dict:
    """The summary of ``view``, then the ``hooks``' sections over it: each section's key is placed (with its empty
    value) after ``workers_lost`` and filled by its provider. Without hooks, the base summary only."""
    duration = view.duration_s
    spans = view.stage_spans()
    warmup = {st.name for st, _a, _b in spans if getattr(st, "warmup", False)}
    cells = [c for k, c in view.merged.cells.items() if k[1] not in warmup]
    total, ok, errors = _counts(cells)
    sketches = {m.key: Recorder.merged_sketch(cells, m.key) for m in having("top")}
    sources = view.merged.token_sources
    kv_total = sum(f.ratio_sum for f in view.merged.kv_fill.values())
    kv_n = sum(f.samples for f in view.merged.kv_fill.values())
    kv_sq = sum(f.sq_sum for f in view.merged.kv_fill.values())
    error_rate = (total - ok) / total if total else 0.0
    checks = view.slos.evaluate(sketches, error_rate)
    good = sum(c.good for c in cells)
    server, turns = _server_section(view), _turns(view, warmup)
    share = workload_share(view.options, sum(c.prompt_tokens for c in cells), sum(c.prompts for c in cells), turns)
    summary = {
        "schema": SCHEMA,
        "duration_s": duration,
        "workers": view.worker_count,
        "model": view.model,
        "host": view.host,
        "requests": {
            "total": total,
            "ok": ok,
            "failed": total - ok,
            "errors": errors,
            "warmup": sum(c.requests for k, c in view.merged.cells.items() if k[1] in warmup),
        },
        "tokens": {
            "prompt": sum(c.prompt_tokens for c in cells),
            "output": sum(c.output_tokens for c in cells),
            "reasoning": sum(c.reasoning_tokens for c in cells),
            "answer": sum(c.output_tokens - c.reasoning_tokens for c in cells),
            "output_per_s": sum(c.output_tokens for c in cells) / duration if duration > 0 else None,
            "source": "tokenizer" if sources.get("tokenizer", 0) > sources.get("usage", 0) else "usage",
            "source_counts": dict(sources),
            "prompt_mismatch_ratio": (
                view.merged.mismatch_abs / view.merged.mismatch_server if view.merged.mismatch_server else None
            ),
        },
        **{f"{m}_ms": q_ms(s) for m, s in sketches.items()},
        "goodput_rps": good / duration if duration > 0 else None,
        "slo": {"passed": all(c["passed"] for c in checks), "checks": checks},
        "stages": [_stage_entry(view, st, a, b) for st, a, b in spans],
        "turns": turns,
        "server": server,
        "prefix_cache": prefix_cache_section(server["prefix_cache_hit_rate"], share),
        "client_kv_block_fill": {"mean": kv_total / kv_n if kv_n else None, "var": _var(kv_total, kv_sq, kv_n),
                                 "block_size": view.merged.kv_block, "block_size_source": view.merged.kv_block_source},
        "workers_lost": sorted(view.lost_workers),
        **(hooks.empty(view) if hooks is not None else {}),
        "timeseries": timeseries(view),
        "histograms": _histograms(cells, tuple(m.key for m in having("distribution"))),
    }
    if hooks is not None:
        hooks.fill(view, summary)
    return summary
