"""The dynamic-batching failure detector: P99 latency up while the server's batch shrinks.

A window is *flagged* when, against the baseline, its P99 latency rose by at least ``p99_rise``
(default 0.40, "+40 %") **and** its median batch size (the server's ``num_requests_running``) fell
below ``size_ratio`` of the baseline (default 0.35, "down more than 65 %"). ``consecutive`` flagged
windows in a row (default 3) give the verdict "dynamic batching failed".

Baseline: the first ``baseline_windows`` windows with traffic (a request finished in them, the client
P99 and at least one server scrape are known); its P99 and batch size are the medians over those
windows, so one slow ramp-up window does not set it. Windows before and inside the baseline are never
flagged. A window without the data to judge it (no finished request, no scrape) is not flagged and so
breaks a run of flagged windows. The P99 read is the client's TTFT P99: when batching collapses,
requests queue, and the queue lands in the first-token path (decode ITL may even improve).

    result = detect(windows, BatchingRule(p99_rise=0.4, size_ratio=0.35, consecutive=3))
    result["verdict"], result["flagged_windows"]
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from telemetry.attribution.options import (
    BATCHING_P99_RISE_DEFAULT,
    BATCHING_SIZE_RATIO_DEFAULT,
    BATCHING_WINDOWS_DEFAULT,
)
from telemetry.attribution.window import Window


@dataclass(frozen=True, slots=True)
class BatchingRule:
    p99_rise: float = BATCHING_P99_RISE_DEFAULT
    """Flag when P99 >= baseline * (1 + p99_rise)."""
    size_ratio: float = BATCHING_SIZE_RATIO_DEFAULT
    """... and median batch size < baseline * size_ratio."""
    consecutive: int = BATCHING_WINDOWS_DEFAULT
    """Flagged windows in a row that give the verdict."""
    baseline_windows: int = BATCHING_WINDOWS_DEFAULT
    """Windows with traffic that set the baseline."""
    metric: str = "ttft_p99_ms"
    """The client figure whose rise is judged."""


def _judgeable(w: Window, metric: str) -> bool:
    return w.requests > 0 and w.metric(metric) is not None and w.running_median is not None


def baseline(windows: Sequence[Window], rule: BatchingRule = BatchingRule()) -> dict | None:
    """The baseline the rule compares with: the first ``baseline_windows`` judgeable windows (None: not enough).
    ``{"windows", "p99_ms", "batch_size_median", "metric"}``; the live detector
    (telemetry/control/detectors.py) freezes it."""
    base = [w for w in windows if _judgeable(w, rule.metric)][: rule.baseline_windows]
    if len(base) < rule.baseline_windows:
        return None
    return {
        "windows": [w.index for w in base],
        "p99_ms": statistics.median(w.metric(rule.metric) for w in base),
        "batch_size_median": statistics.median(w.running_median for w in base),
        "metric": rule.metric,
    }


def flagged(w: Window, base: dict, rule: BatchingRule = BatchingRule()) -> bool:
    """Does window ``w`` show the collapse against ``base`` (:func:`baseline`)? P99 up by ``p99_rise`` and the
    median batch below ``size_ratio`` of the baseline's; a window without the data to judge it is not flagged."""
    return (
        _judgeable(w, rule.metric)
        and w.metric(rule.metric) >= base["p99_ms"] * (1.0 + rule.p99_rise)
        and w.running_median < base["batch_size_median"] * rule.size_ratio
    )


def detect(windows: Sequence[Window], rule: BatchingRule = BatchingRule()) -> dict:
    """Verdict, flagged window indices and the baseline used (``baseline`` is None without enough data)."""
    result: dict = {"verdict": False, "flagged_windows": [], "baseline": None, "failed_at_s": None}
    base = baseline(windows, rule)
    if base is None:
        return result
    result["baseline"] = base
    after = base["windows"][-1]
    streak: list[Window] = []
    for w in windows:
        if w.index <= after:
            continue
        if not flagged(w, base, rule):
            streak = []
            continue
        result["flagged_windows"].append(w.index)
        streak.append(w)
        if len(streak) == rule.consecutive and not result["verdict"]:
            result["verdict"] = True
            result["failed_at_s"] = streak[0].start_s
    return result
