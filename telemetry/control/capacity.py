"""The SLO judge of a capacity search's probes (``--shape slo-search``), installed on the stage board.

The search shape (``shapes/search.py``) sits below telemetry and cannot compute an SLO verdict itself: the master
(or local run) puts a :class:`StageJudge` on ``board.judge``, and the shape calls it with a probe's stage name. The
verdict is :meth:`telemetry.slo.SloSet.evaluate` over the stage's merged cells — the same objectives and rule as the
end-of-run gate — plus the error rate (``--slo-error-rate``, else :data:`ERROR_RATE_DEFAULT`), and the figures the
capacity section reports: requests, errors, goodput (requests meeting every per-request objective, per second) and
output tokens/s delivered during the stage's span (``RunView.delivered_tokens``, as the summary's stage rows).

    judge = StageJudge(hub.view, merger.reported_until)
    judge("probe 3 users=8", until_wall=time.time())   # {"complete": True, "passed": False, "checks": [...], ...}
    judge("probe 3 users=8", None, windows=3)          # ... and "windows": the hold so far in 3 equal windows

The ``windows`` are the stage's trailing windows the over-saturation rule reads (``shapes.saturation.over_saturated``):
its span so far, up to where every process has reported, cut in equal parts (each at least a recorder slot wide),
each with its requests, output tokens/s (the tokens of requests ending in it) and TTFT p50.
"""

from __future__ import annotations

from collections.abc import Callable

from telemetry.measure.recorder import Recorder
from telemetry.measure.view import RunView
from telemetry.slo import SloSet

ERROR_RATE_DEFAULT = 0.01
"""The error-rate objective of a probe when ``--slo-error-rate`` is not given: at most 1 % of requests fail."""


NO_ENERGY = "no GPU energy reading: nothing installed to read one"


class StageJudge:
    """``judge(stage, until_wall)`` -> the stage's SLO verdict and figures from the data merged so far.

    ``energy``: (start wall, end wall) -> (joules the server's GPUs consumed, how it was read or why not); the
    telemetry wiring sets it to the run record's GPU watch (``--gpu-metrics-url``). A final verdict (``until_wall``
    given) carries the stage's ``energy_j`` and ``energy_note``."""

    def __init__(self, view: Callable[[], RunView], reported_until: Callable[[], float | None]) -> None:
        self._view = view
        self._reported_until = reported_until
        self.energy: Callable[[float, float], tuple[float | None, str]] = lambda _a, _b: (None, NO_ENERGY)

    def __call__(self, stage: str, until_wall: float | None, windows: int = 0) -> dict:
        view = self._view()
        reported = self._reported_until()
        complete = until_wall is None or (reported is not None and reported >= until_wall - view.t0_wall)
        span = next(((a, b) for st, a, b in view.stage_spans() if st.name == stage), None)
        span_s = (span[1] - span[0]) if span else 0.0
        cells = view.merged.select(stage=stage)
        total = sum(c.requests for c in cells)
        ok = sum(c.ok for c in cells)
        thresholds = dict(view.slos.thresholds)
        thresholds.setdefault("error_rate", ERROR_RATE_DEFAULT)
        slos = SloSet(thresholds, set(view.slos.when_reasoning))
        sketches = {k: Recorder.merged_sketch(cells, k) for k in cells[0].sketches} if cells else {}
        checks = slos.evaluate(sketches, (total - ok) / total if total else 0.0) if cells else []
        e2e = sketches["e2e"].quantile(0.99) if "e2e" in sketches else None
        joules, energy_note = (self.energy(view.t0_wall + span[0], view.t0_wall + span[1])
                               if span and span_s > 0 and until_wall is not None else (None, "not read while held"))
        ttft = sketches["ttft"].quantile(0.99) if "ttft" in sketches else None
        return {
            "complete": complete,
            "passed": bool(total) and all(c["passed"] for c in checks),
            "checks": checks,
            "requests": total,
            "errors": total - ok,
            "goodput_rps": sum(c.good for c in cells) / span_s if span_s > 0 else None,
            "output_per_s": view.delivered_tokens(*span) / span_s if span and span_s > 0 else None,
            "span_s": span_s,
            "e2e_p99_s": e2e,
            "ttft_p99_ms": None if ttft is None else ttft * 1000.0,
            "windows": _windows(view, span, reported, windows) if windows and span else [],
            "energy_j": joules,
            "energy_note": energy_note,
        }


def _windows(view: RunView, span: tuple[float, float], reported: float | None, n: int) -> list[dict]:
    """The stage's span up to ``reported`` (seconds since the run start every process has reported to) in ``n``
    equal windows; [] while that is shorter than ``n`` recorder slots."""
    start = span[0]
    end = min(span[1], reported if reported is not None else start)
    if end - start < n * view.slot_s:
        return []
    width = (end - start) / n
    out = []
    for w in view.windows(width, origin_s=start)[:n]:
        p50 = w.sketches["ttft"].quantile(0.5) if w.requests else None
        out.append({"start_s": w.start_s, "end_s": w.end_s, "requests": w.requests,
                    "output_per_s": w.output_tokens / (w.end_s - w.start_s),
                    "ttft_p50_ms": None if p50 is None else p50 * 1000.0})
    return out
