"""Saturation verdict over a sweep's per-stage results (the summary's ``saturation`` section).

The server is saturated at the first measured stage that adds load (more users or a higher rate than
the stage before) but gains less than 5 % output throughput while TTFT p99 still grows: more load now
buys only queueing.

    verdict([{"name": "users=8", "users": 8, "output_per_s": 900, "ttft_ms": {"p99": 210}, "requests": 80},
             {"name": "users=16", "users": 16, "output_per_s": 920, "ttft_ms": {"p99": 480}, "requests": 90}])
    -> {"stage": "users=16", "reason": "users=16: output 920 tok/s is +2.2% over users=8 (< 5%) while ..."}

Within one stage (a capacity search's probe, held at one load), over-saturation is the same rule over the stage's
trailing windows (:func:`over_saturated`): the output rate stays flat (gains < 5 % from the first window to the
last) while TTFT p50 climbs window after window — the queue grows without bound, so the load cannot be held.
"""

from __future__ import annotations

MIN_GAIN = 0.05
OVERSAT_WINDOWS = 3
"""A stage is judged over-saturated over this many trailing windows (its hold so far, cut in equal parts)."""
OVERSAT_TTFT_GROWTH = 1.5
"""...when TTFT p50 rises in each of them and ends at least this multiple of the first window's,"""
OVERSAT_TTFT_SLOPE = 0.25
"""...or grows at least this many seconds per second (a queue already deep when the windows start: 15 -> 16.5 s over
3 s is +10 % but the queue gains half a second of waiting every second)."""


def _measured(stages: list[dict]) -> list[dict]:
    return [
        s
        for s in stages
        if not s.get("warmup")
        and not str(s.get("name", "")).startswith("warmup ")
        and (s.get("requests") or 0) > 0
        and s.get("output_per_s") is not None
        and (s.get("ttft_ms") or {}).get("p99") is not None
    ]


def _load(stage: dict) -> float | None:
    rate = stage.get("rate")
    return float(rate) if rate is not None else (float(stage["users"]) if stage.get("users") is not None else None)


def verdict(stages: list[dict]) -> dict:
    """``{"stage": name or None, "reason": why}`` for the stages in run order."""
    rows = _measured(stages)
    if len(rows) < 2:
        return {"stage": None, "reason": f"{len(rows)} measured stage(s) with results; a verdict needs two or more"}
    checked = 0
    last = ""
    for prev, cur in zip(rows, rows[1:], strict=False):
        lp, lc = _load(prev), _load(cur)
        if lp is None or lc is None or lc <= lp or prev["output_per_s"] <= 0:
            continue
        checked += 1
        gain = cur["output_per_s"] / prev["output_per_s"] - 1.0
        t_prev, t_cur = prev["ttft_ms"]["p99"], cur["ttft_ms"]["p99"]
        what = (
            f"{cur['name']}: output {cur['output_per_s']:.0f} tok/s is {gain:+.1%} over {prev['name']}"
            f" ({prev['output_per_s']:.0f} tok/s)"
        )
        if gain < MIN_GAIN and t_cur > t_prev:
            return {
                "stage": cur["name"],
                "reason": f"{what} (< {MIN_GAIN:.0%}) while TTFT p99 grew {t_prev:.0f} -> {t_cur:.0f} ms",
            }
        last = f"{what}, TTFT p99 {t_prev:.0f} -> {t_cur:.0f} ms"
    if not checked:
        return {"stage": None, "reason": "no stage adds load over the one before (not a concurrency or rate sweep)"}
    return {"stage": None, "reason": f"not saturated: no stage gained < {MIN_GAIN:.0%} with TTFT p99 growing; {last}"}


def section(_view, summary: dict) -> dict:
    """The ``saturation`` summary section: the verdict over the summary's per-stage rows (``summary["stages"]``)."""
    return verdict(summary.get("stages") or [])


def over_saturated(windows: list[dict]) -> str | None:
    """Why a stage held at one load is over-saturated, or None: ``windows`` in time order, each ``{"start_s",
    "end_s", "requests", "output_per_s", "ttft_p50_ms"}`` (the stage's trailing windows, complete ones only).
    Over the last :data:`OVERSAT_WINDOWS` with requests, output tok/s gains less than :data:`MIN_GAIN` (or than one
    request of the first window: a window's tokens are counted in whole requests, so 4 against 5 requests is
    counting, not growth) while TTFT p50 rises in every window, to at least :data:`OVERSAT_TTFT_GROWTH` x the first
    or by :data:`OVERSAT_TTFT_SLOPE` s per s."""
    rows = [w for w in windows if w.get("requests") and w.get("output_per_s") and w.get("ttft_p50_ms")]
    if len(rows) < OVERSAT_WINDOWS:
        return None
    rows = rows[-OVERSAT_WINDOWS:]
    first, last = rows[0], rows[-1]
    gain = last["output_per_s"] / first["output_per_s"] - 1.0
    flat = max(MIN_GAIN, 1.0 / first["requests"])  # a window's tokens come in whole requests: one more is no gain
    ttfts = [w["ttft_p50_ms"] for w in rows]
    climbing = all(b > a for a, b in zip(ttfts, ttfts[1:], strict=False))
    span_s = (last["start_s"] + last["end_s"]) / 2 - (first["start_s"] + first["end_s"]) / 2
    slope = (ttfts[-1] - ttfts[0]) / 1000.0 / span_s if span_s > 0 else 0.0
    grows = ttfts[-1] >= OVERSAT_TTFT_GROWTH * ttfts[0] or slope >= OVERSAT_TTFT_SLOPE
    if gain >= flat or not climbing or not grows:
        return None
    return (f"over-saturated: output {first['output_per_s']:.0f} -> {last['output_per_s']:.0f} tok/s ({gain:+.1%}, "
            f"< {flat:.0%}) while TTFT p50 climbed {' -> '.join(f'{t:.0f}' for t in ttfts)} ms ({slope:+.2f} s/s) "
            f"over {first['start_s']:.1f}-{last['end_s']:.1f} s")
