"""Live detectors on the master (or a local run): the batching-collapse rule and the SLO checks on a sliding
window while the run goes on, with the same rule code as the post-run verdicts.

- **batching**: the rule of :mod:`telemetry.attribution.batching` (``--batching-p99-rise``, ``--batching-size-ratio``,
  ``--batching-windows``, ``--attribution-window``). The baseline is the post-run one — the first N judgeable
  windows of the run's grid — frozen once those windows are settled. At each check, the N windows that end at
  ``until_s`` (the end of the data every live process has reported; a worker ships every 3 s) are judged with
  :func:`~telemetry.attribution.batching.flagged`; ``degraded`` while all N are flagged. So the gauge reads 1 about
  N windows after a collapse starts, and 0 again after the first window that is not flagged.
- **slo**: :meth:`telemetry.slo.SloSet.evaluate` over the trailing N windows' merged sketches (one span of
  N × window seconds ending at ``until_s``); only objectives whose metric the recorder keeps per time slot
  (``windowed`` in telemetry/metrics.py: TTFT, ITL, ...) and the error rate — the decode span is judged at the end
  of the run only. ``breached`` while the value is past its
  threshold; a span without requests judges nothing.
- **imbalance**: :func:`telemetry.attribution.imbalance.judge` on the trailing ``--imbalance-windows`` windows of
  the per-engine server series: ``imbalanced`` while one engine stays off the rest of the fleet (waiting, queue-time
  p99, mean ITL, finished requests), naming the engine.

Each flip is logged once; ``--llm-stop-on batching,slo,imbalance`` ends the run when a named detector fires, and
the summary's ``detectors`` section says which, when and why. The state is a JSON-ready dict (the run view's
``detectors``): the exporter's ``llm_batching_degraded`` / ``llm_engine_imbalanced{target,engine}`` /
``llm_slo_breached{slo}`` / ``llm_slo_value{slo}`` / ``llm_slo_threshold{slo}``, the web UI's LLM tab and the
summary read it.

    det = LiveDetectors(); state = det.check(view, until_s=view.duration_s)   # state["batching"]["degraded"]
"""

from __future__ import annotations

import logging

from telemetry.attribution.batching import baseline, flagged
from telemetry.attribution.imbalance import judge as judge_imbalance
from telemetry.attribution.section import AttributionConfig
from telemetry.attribution.source import client_windows, server_samples
from telemetry.attribution.window import align
from telemetry.measure.view import RunView
from telemetry.options import STOP_ON_CHOICES
from telemetry.slo import SLO_DEFS, SloSet

log = logging.getLogger(__name__)

DETECTORS = STOP_ON_CHOICES
"""What --llm-stop-on may name."""


def stop_on(options) -> frozenset[str]:
    """The detectors ``--llm-stop-on`` names (empty when not given)."""
    text = getattr(options, "llm_stop_on", None) if options is not None else None
    return frozenset(p.strip() for p in str(text or "").split(",") if p.strip() in DETECTORS)


class LiveDetectors:
    """The detectors' state across checks: the frozen baseline, the last flags (for flip lines), the stop."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self._baseline: dict | None = None
        self._last: dict[str, bool] = {}
        self.stopped_by: dict | None = None
        self.state: dict | None = None

    # ---- evaluation ------------------------------------------------------------------------------
    def _batching(self, view: RunView, cfg: AttributionConfig, until_s: float) -> dict:
        rule, w = cfg.batching, cfg.window_s
        n = rule.consecutive
        out: dict = {"judged": False, "degraded": False, "baseline": self._baseline, "windows": []}
        if self._baseline is None:
            samples = server_samples(view.server_series)
            grid = [x for x in align(client_windows(view, w), samples) if x.end_s <= until_s + 1e-9]
            base = baseline(grid, rule)
            if base is not None:
                self._baseline = base | {"end_s": grid[base["windows"][-1]].end_s}
                out["baseline"] = self._baseline
        base = self._baseline
        origin = until_s - n * w
        if base is None or origin < base["end_s"] - 1e-9:  # the post-run rule never flags inside the baseline
            return out
        # only the scrapes the trailing windows need (the last run's worth would be parsed every second otherwise)
        recent = server_samples(d for d in view.server_series if isinstance(d.get("t"), int | float)
                                and d["t"] >= origin - w)
        trailing = align(client_windows(view, w, origin)[:n], recent)
        if len(trailing) < n:
            return out
        flags = [flagged(x, base, rule) for x in trailing]
        out["judged"] = True
        out["degraded"] = all(flags)
        out["windows"] = [
            {"start_s": x.start_s, "end_s": x.end_s, "requests": x.requests, "ttft_p99_ms": x.client.ttft_p99_ms,
             "running_median": x.running_median, "flagged": f}
            for x, f in zip(trailing, flags, strict=True)
        ]
        return out

    @staticmethod
    def _slo(view: RunView, span_s: float, until_s: float) -> list[dict]:
        origin = until_s - span_s
        if not view.slos or origin < 0:
            return []
        win = view.windows(span_s, origin)[0]
        live = {k: v for k, v in view.slos.thresholds.items() if SLO_DEFS[k].metric in (None, *win.sketches)}
        if not live or win.requests == 0:
            return []
        checks = SloSet(live).evaluate(win.sketches, win.errors / win.requests)
        return [{"name": c["name"], "threshold": c["threshold"], "value": c["value"],
                 "breached": c["value"] is not None and not c["passed"]} for c in checks]

    def evaluate(self, view: RunView, until_s: float) -> dict:
        """The state at ``until_s`` (seconds since the run start; the data is complete up to there)."""
        cfg = AttributionConfig.from_options(view.options)
        span = cfg.batching.consecutive * cfg.window_s
        return {
            "until_s": until_s,
            "window_s": cfg.window_s,
            "batching": self._batching(view, cfg, until_s),
            "slo_window_s": span,
            "slo": self._slo(view, span, until_s),
            "imbalance": judge_imbalance(view.server_series, until_s, cfg.window_s, cfg.imbalance),
            "stop_on": sorted(stop_on(view.options)),
            "stopped_by": self.stopped_by,
        }

    # ---- a check: evaluate, log the flips, decide on a stop ---------------------------------------
    def check(self, view: RunView, until_s: float) -> dict:
        """Evaluate, log each detector that flipped (once per flip), and set ``stopped_by`` when a detector
        named in ``--llm-stop-on`` fires. Returns the new state (also in ``self.state``)."""
        state = self.evaluate(view, until_s)
        now = {"batching": state["batching"]["degraded"], "imbalance": state["imbalance"]["imbalanced"]}
        for c in state["slo"]:
            now[f"slo:{c['name']}"] = c["breached"]
        for key, on in now.items():
            if self._last.get(key, False) != on:
                log.warning(f"live detector {key}: {'FIRED' if on else 'cleared'} at {until_s:.0f} s — "
                            f"{_why(key, state)}")
        self._last = now
        wanted = stop_on(view.options)
        if self.stopped_by is None:
            for key, on in now.items():
                kind = key.split(":", 1)[0]
                if on and kind in wanted:
                    self.stopped_by = {"detector": key, "at_s": until_s, "reason": _why(key, state)}
                    state["stopped_by"] = self.stopped_by
                    break
        self.state = state
        return state


def _why(key: str, state: dict) -> str:
    """One line on what the detector saw."""
    if key == "imbalance":
        im = state["imbalance"]
        return im["evidence"] or f"no engine off the fleet over the last {len(im['windows'])} windows"
    if key == "batching":
        b = state["batching"]
        base = b["baseline"] or {}
        if not b["windows"]:
            return "not judged yet"
        p99 = ", ".join("—" if x["ttft_p99_ms"] is None else f"{x['ttft_p99_ms']:.0f}" for x in b["windows"])
        run = ", ".join("—" if x["running_median"] is None else f"{x['running_median']:g}" for x in b["windows"])
        return (f"last {len(b['windows'])} windows of {state['window_s']:g} s: TTFT p99 {p99} ms vs baseline "
                f"{base.get('p99_ms', 0):.0f} ms, batch median {run} vs baseline {base.get('batch_size_median', 0):g}")
    name = key.split(":", 1)[1]
    c = next(c for c in state["slo"] if c["name"] == name)
    return (f"{name} {c['value']:.4g} vs threshold {c['threshold']:g} over the last {state['slo_window_s']:g} s"
            if c["value"] is not None else f"{name} has no data")
