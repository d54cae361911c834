"""Live progress of a headless run: every ``--llm-progress-interval`` seconds (0 = off) one line on stdout from the
master (or the local run), over the last interval up to where every process has reported its results:

    [llm] 40s stage main | users 16 | 12.3 req/s | 1580 out tok/s | TTFT p50 210 ms p99 480 ms | ITL p99 31 ms |
    errors 0 (0.0%) | server KV 41.0% waiting 3

A figure with nothing behind it yet prints ``-``; the server part only with a scraped /metrics.

    line = progress_line(view, 10.0)
"""

from __future__ import annotations

import math

from telemetry.measure.recorder import SLOT_ALPHA
from telemetry.measure.sketch import LogSketch
from telemetry.measure.view import RunView
from telemetry.metrics import BY_KEY

SHOWN: dict[str, tuple[float, ...]] = {"ttft": (0.5, 0.99), "itl": (0.99,)}
"""The client metrics the line shows (registry keys of windowed metrics: the slots keep their sketches) and their
quantiles, in order."""


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v * 1000:.0f} ms"


def progress_line(view: RunView, seconds: float, until_s: float | None = None) -> str:
    """The line for the whole wall-clock slots in the ``seconds`` before ``until_s`` (where every process has
    reported; default: now), rates per second of those slots: a slot still filling, or results still on their way,
    would otherwise read as a drop."""
    end_rel = view.duration_s if until_s is None else max(0.0, min(until_s, view.duration_s))
    slot_s = view.slot_s
    last = math.floor((view.t0_wall + end_rel) / slot_s)  # the first slot not yet complete
    first = max(last - max(1, round(seconds / slot_s)), math.floor(view.t0_wall / slot_s))
    span = (last - first) * slot_s
    requests = errors = output = 0
    sk = {m: LogSketch(SLOT_ALPHA) for m in SHOWN}
    for i, slot in view.merged.slots.items():
        if first <= i < last:
            requests += slot.requests
            errors += slot.errors
            output += slot.output_tokens
            for m, s in sk.items():
                s.merge(slot.sketches[m])
    duration = view.duration_s
    stage = view.current_stage.name if view.current_stage is not None else "main"
    parts = [
        f"[llm] {duration:.0f}s stage {stage}",
        f"users {view.active_users}",
        f"{requests / span if span > 0 else 0.0:.1f} req/s",
        f"{output / span if span > 0 else 0.0:.0f} out tok/s",
        *(f"{BY_KEY[m].label} " + " ".join(f"p{q * 100:g} {_ms(sk[m].quantile(q))}" for q in qs)
          for m, qs in SHOWN.items()),
        f"errors {errors} ({errors / requests * 100:.1f}%)" if requests else f"errors {errors}",
    ]
    latest = view.server_latest
    if latest:
        kv, waiting = latest.get("kv_cache_usage"), latest.get("requests_waiting")
        parts.append(f"server KV {'-' if kv is None else f'{kv * 100:.1f}%'} "
                     f"waiting {'-' if waiting is None else f'{waiting:.0f}'}")
    return " | ".join(parts)
