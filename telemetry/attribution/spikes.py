"""Spike report: windows whose client P99 TTFT or ITL is ``factor`` times the run's typical P99, with
the server signals of the same window and a cause in words.

The "run median" a window is compared with is the median, over the windows that have the figure, of
that window figure (the typical tail, so a heavy but steady tail is not a spike); at least
``min_windows`` windows must have it. The cause category comes from the first rule in :data:`CAUSES`
that holds for the window, most specific first:

- ``preemption``  — the server preempted requests in the window (KV blocks ran out; work is recomputed);
- ``kv_pressure`` — KV-cache usage reached ``kv_full`` (default 0.95);
- ``batching``    — requests were waiting while the batch (``num_requests_running``) was below
                    ``size_ratio`` of the run's median batch;
- ``queueing``    — requests were waiting in the server's queue (gauge), or the server's queue-time
                    p99 is at least ``queue_share`` of the window's client TTFT p99 (histogram);
- ``unknown``     — none of these moved (look at the network, the client, or the model's own speed).

    spikes = find_spikes(windows, SpikeRule(factor=2.0), wall_start=time.time() - elapsed)
    spikes[0]["cause"]  # 'TTFT p99 3.1× at 12:03:10–12:03:20 with 41 waiting, KV 0.99, 12 preemptions'
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from telemetry.attribution.options import BATCHING_SIZE_RATIO_DEFAULT, SPIKE_FACTOR_DEFAULT
from telemetry.attribution.window import Window

METRICS = {"ttft_p99_ms": "TTFT p99", "itl_p99_ms": "ITL p99"}


@dataclass(frozen=True, slots=True)
class SpikeRule:
    factor: float = SPIKE_FACTOR_DEFAULT
    """A window is a spike when its P99 > factor * the median window P99."""
    kv_full: float = 0.95
    size_ratio: float = BATCHING_SIZE_RATIO_DEFAULT
    min_windows: int = 3
    queue_share: float = 0.5
    """Queueing when the server's queue-time p99 is at least this share of the window's client TTFT p99."""


@dataclass(frozen=True, slots=True)
class RunContext:
    rule: SpikeRule
    running_median: float | None
    """Median over windows of the window's median batch size."""


def _preempted(w: Window, ctx: RunContext) -> bool:
    return (w.preemptions or 0) > 0


def _kv_full(w: Window, ctx: RunContext) -> bool:
    return w.kv_usage_max is not None and w.kv_usage_max >= ctx.rule.kv_full


def _batch_collapsed(w: Window, ctx: RunContext) -> bool:
    return (
        (w.waiting_max or 0) > 0
        and w.running_median is not None
        and ctx.running_median is not None
        and w.running_median < ctx.running_median * ctx.rule.size_ratio
    )


def _queued(w: Window, ctx: RunContext) -> bool:
    """Requests were seen waiting, or the server's own queue-time histogram puts at least half of the
    window's client TTFT p99 in the queue: the gauge is sampled every scrape and misses a burst queued
    and drained between two scrapes (the start of a run), the histogram counts every request."""
    if (w.waiting_max or 0) > 0:
        return True
    h, ttft = w.server.get("queue"), w.metric("ttft_p99_ms")
    queue_p99 = h.quantile(0.99) if h is not None and h.count > 0 else None
    return queue_p99 is not None and bool(ttft) and queue_p99 * 1000.0 >= ctx.rule.queue_share * ttft


# Cause category -> rule, in priority order (dicts keep insertion order).
CAUSES: dict[str, Callable[[Window, RunContext], bool]] = {
    "preemption": _preempted,
    "kv_pressure": _kv_full,
    "batching": _batch_collapsed,
    "queueing": _queued,
}


def cause_category(w: Window, ctx: RunContext) -> str:
    return next((name for name, holds in CAUSES.items() if holds(w, ctx)), "unknown")


def server_signals(w: Window) -> dict:
    """The server figures of a window, as they go into the summary (None = not scraped); ``*_ms`` are the
    window's share of the server histograms as Q objects (with the ``bucket`` each quantile lies in)."""
    out = {
        "running_median": w.running_median,
        "waiting_max": w.waiting_max,
        "kv_usage_max": w.kv_usage_max,
        "preemptions": w.preemptions,
    }
    for name in ("queue", "prefill", "ttft", "itl"):
        h = w.server.get(name)
        out[f"{name}_ms"] = h.to_q() if h is not None and h.count > 0 else None
    return out


def _span(w: Window, wall_start: float | None) -> str:
    if wall_start is None:
        return f"t={w.start_s:.0f}–{w.end_s:.0f}s"
    clock = [time.strftime("%H:%M:%S", time.localtime(wall_start + t)) for t in (w.start_s, w.end_s)]
    return "–".join(clock)


def _num(v: float) -> str:
    return f"{v:.0f}" if float(v).is_integer() else f"{v:.1f}"


def queue_p99_text(w: Window) -> str:
    """The server's queue-time p99 as the bucket it lies in (what the histogram knows for sure)."""
    h = w.server.get("queue")
    b = h.quantile_bucket(0.99) if h is not None else None
    if b is None:
        return ""
    lo, hi = b[0] * 1000.0, b[1] * 1000.0
    if math.isinf(hi):
        return f"server queue p99 >{lo:.0f} ms"
    return f"server queue p99 ≤{hi:.0f} ms" if lo == 0 else f"server queue p99 {lo:.0f}–{hi:.0f} ms"


def describe(w: Window, metric: str, ratio: float, ctx: RunContext, wall_start: float | None) -> str:
    """e.g. ``TTFT p99 3.1× at 12:03:10–12:03:20 with 41 waiting, KV 0.99, 12 preemptions``."""
    parts = []
    if w.waiting_max is not None:
        parts.append(f"{_num(w.waiting_max)} waiting")
    if w.kv_usage_max is not None:
        parts.append(f"KV {w.kv_usage_max:.2f}")
    if w.preemptions is not None:
        parts.append(f"{_num(w.preemptions)} preemptions")
    if w.running_median is not None:
        typical = f" (run median {_num(ctx.running_median)})" if ctx.running_median is not None else ""
        parts.append(f"batch {_num(w.running_median)}{typical}")
    queue = queue_p99_text(w)
    if queue:
        parts.append(queue)
    signals = f" with {', '.join(parts)}" if parts else " (no server metrics)"
    return f"{METRICS[metric]} {ratio:.1f}× at {_span(w, wall_start)}{signals}"


def find_spikes(
    windows: Sequence[Window], rule: SpikeRule = SpikeRule(), wall_start: float | None = None
) -> list[dict]:
    """Spikes in time order (a window may spike in both metrics: then two entries)."""
    batches = [w.running_median for w in windows if w.running_median is not None and w.requests > 0]
    ctx = RunContext(rule, statistics.median(batches) if batches else None)
    spikes: list[dict] = []
    for metric in METRICS:
        values = [v for w in windows if (v := w.metric(metric)) is not None]
        if len(values) < rule.min_windows:
            continue
        typical = statistics.median(values)
        if typical <= 0:
            continue
        for w in windows:
            v = w.metric(metric)
            if v is None or v <= rule.factor * typical:
                continue
            ratio = v / typical
            category = cause_category(w, ctx)
            spikes.append(
                {
                    "start_s": w.start_s,
                    "end_s": w.end_s,
                    "window": w.index,
                    "requests": w.requests,
                    "metric": metric,
                    "value_ms": v,
                    "run_median_ms": typical,
                    "ratio": ratio,
                    "server": server_signals(w),
                    "category": category,
                    "cause": f"{describe(w, metric, ratio, ctx, wall_start)} → {category.replace('_', ' ')}",
                }
            )
    spikes.sort(key=lambda s: (s["start_s"], s["metric"]))
    return spikes
