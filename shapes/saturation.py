"""Saturation verdict over a sweep's per-stage results (the summary's ``saturation`` section).

The server is saturated at the first measured stage that adds load (more users or a higher rate than
the stage before) but gains less than 5 % output throughput while TTFT p99 still grows: more load now
buys only queueing.

    verdict([{"name": "users=8", "users": 8, "output_per_s": 900, "ttft_ms": {"p99": 210}, "requests": 80},
             {"name": "users=16", "users": 16, "output_per_s": 920, "ttft_ms": {"p99": 480}, "requests": 90}])
    -> {"stage": "users=16", "reason": "users=16: output 920 tok/s is +2.2% over users=8 (< 5%) while ..."}
"""

from __future__ import annotations

MIN_GAIN = 0.05


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
