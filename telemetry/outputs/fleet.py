"""The server as a fleet: the summary's ``server.targets`` (one per scraped /metrics) and ``server.engines`` (one
per target and ``engine`` label, i.e. per replica and data-parallel rank), from the scraper's per-engine samples.

Each engine's figures are read from its own series exactly as the whole server's are from the fleet's (the
fleet sample adds counters and histograms and averages the KV usage), so an engine's ``requests_finished`` and
``preemptions`` add up to the server's, and ``kv_blocks_total`` is the sum of the engines' ``num_gpu_blocks``.

    engines = engine_entries(view.server_series)   # [{"target": ..., "engine": "0", "requests_finished": 12, ...}]
"""

from __future__ import annotations

from telemetry.attribution.histogram import CumulativeHistogram
from telemetry.measure.scraper import engine_keys, engine_series


def counter_delta(series: list[dict], field: str, start_s: float, end_s: float) -> float | None:
    """Counter increase over [start_s, end_s] from the samples around it (resets count from zero)."""
    before = [s[field] for s in series if s["t"] <= start_s and s.get(field) is not None]
    inside = [s[field] for s in series if start_s < s["t"] <= end_s and s.get(field) is not None]
    points = ([before[-1]] if before else []) + inside
    if len(points) < 2:
        return 0.0 if points else None
    total = 0.0
    for a, b in zip(points, points[1:], strict=False):
        total += b - a if b >= a else b
    return total


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _int(value) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def hist_growth(series: list[dict], name: str) -> CumulativeHistogram | None:
    """A server histogram's growth from the first sample that has it to the last (None without two)."""
    having = [s for s in series if name in (s.get("hist") or {})]
    if not having:
        return None

    def of(sample: dict) -> CumulativeHistogram:
        h = sample["hist"][name]
        return CumulativeHistogram.from_buckets(dict(zip(h["le"], h["cum"], strict=True)), total_sum=h.get("sum"))

    last = of(having[-1])
    if len(having) == 1:
        return last
    try:
        return last - of(having[0])
    except ValueError:  # bounds changed between scrapes (a restarted server): the last cumulative state
        return last


def _ms(h: CumulativeHistogram | None, q: float) -> float | None:
    v = h.quantile(q) if h is not None and h.count > 0 else None
    return v * 1000.0 if v is not None else None


def figures(series: list[dict]) -> dict:
    """The figures of one engine (or of the fleet) over its series: counters as deltas first to last sample."""
    start = series[0]["t"] if series else 0.0
    end = series[-1]["t"] if series else 0.0

    def delta(field: str) -> int | None:
        d = counter_delta(series, field, start, end)
        return int(d) if d is not None else None

    def values(field: str) -> list[float]:
        return [s[field] for s in series if s.get(field) is not None]

    kv, running, waiting = values("kv_cache_usage"), values("requests_running"), values("requests_waiting")
    queries, hits = delta("prefix_cache_queries_total"), delta("prefix_cache_hits_total")
    queue = hist_growth(series, "queue")
    return {
        "requests_finished": delta("request_success_total"),
        "kv_cache_usage": {"mean": _mean(kv), "max": max(kv) if kv else None},
        "requests_running": {"mean": _mean(running), "max": int(max(running)) if running else None},
        "requests_waiting_max": int(max(waiting)) if waiting else None,
        "queue_time_ms": {"p50": _ms(queue, 0.50), "p99": _ms(queue, 0.99)},
        "preemptions": delta("preemptions_total"),
        "prompt_tokens": delta("prompt_tokens_total"),
        "generation_tokens": delta("generation_tokens_total"),
        "prefix_cache_hit_rate": hits / queries if queries and hits is not None else None,
    }


def engine_entries(series: list[dict]) -> list[dict]:
    """``server.engines``: per target and engine, its identity, cache config and :func:`figures`."""
    out = []
    for key in engine_keys(series):
        own = engine_series(series, key)
        last = own[-1]
        cache = next((s["cache_config"] for s in reversed(own) if s.get("cache_config")), None)
        out.append({
            "target": last.get("target"),
            "role": last.get("role"),
            "engine": last.get("engine", key),
            **figures(own),
            "num_gpu_blocks": _int((cache or {}).get("num_gpu_blocks")),
            "block_size": _int((cache or {}).get("block_size")),
            "cache_config": cache,
        })
    return out


def fleet_totals(engines: list[dict]) -> dict:
    """What the fleet adds up: engines, KV blocks (null when an engine's count is unknown)."""
    blocks = [e["num_gpu_blocks"] for e in engines]
    return {"engine_count": len(engines),
            "kv_blocks_total": sum(blocks) if blocks and None not in blocks else None}
