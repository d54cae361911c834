"""Service-level objectives: thresholds from options or a preset, per-request goodput checks, and
the end-of-run gate (``CHECK FAILED: ...`` lines and exit code 3 on the master).

    slos = SloSet.from_options(parsed_options)       # --slo-ttft-p99-ms 800 / --slo-preset seed
    slos.request_meets(result)                         # every per-request objective met? (goodput)
    checks = slos.evaluate(ttft=..., itl=..., decode_span=..., error_rate=...)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from telemetry.sketch import LogSketch
from users.result import GenerationResult

EXIT_CODE = 3


@dataclass(frozen=True, slots=True)
class SloDef:
    """One objective: an option, the merged metric it reads, and how to judge a single request."""

    name: str
    option: str
    metric: str | None
    """Sketch metric the objective reads (None for error_rate)."""
    quantile: float | None
    request_value: Callable[[GenerationResult], float | None] | None
    """A request's own value in the objective's unit (ms), for goodput; None if not per-request."""


def _ttft_ms(r: GenerationResult) -> float | None:
    return None if r.ttft_s is None else r.ttft_s * 1000.0


def _itl_p95_ms(r: GenerationResult) -> float | None:
    s = r.itl_samples()
    return float(np.quantile(s, 0.95)) * 1000.0 if s.size else None


def _span_ms(r: GenerationResult) -> float | None:
    return None if r.decode_span_s is None else r.decode_span_s * 1000.0


SLO_DEFS: dict[str, SloDef] = {
    d.name: d
    for d in (
        SloDef("ttft_p99_ms", "slo_ttft_p99_ms", "ttft", 0.99, _ttft_ms),
        SloDef("itl_p95_ms", "slo_itl_p95_ms", "itl", 0.95, _itl_p95_ms),
        SloDef("drift_p99_ms", "slo_drift_p99_ms", "decode_span", 0.99, _span_ms),
        SloDef("error_rate", "slo_error_rate", None, None, None),
    )
}

PRESETS: dict[str, dict[str, float]] = {
    "seed": {"ttft_p99_ms": 800.0, "itl_p95_ms": 120.0, "drift_p99_ms": 2500.0},
}
"""``--slo-preset`` values; ``seed`` is the seed article's table in section 2.5."""


class SloSet:
    """The configured thresholds (name -> value); empty when no SLO was asked for."""

    def __init__(self, thresholds: dict[str, float] | None = None) -> None:
        unknown = set(thresholds or {}) - set(SLO_DEFS)
        if unknown:
            raise ValueError(f"unknown SLO names {sorted(unknown)}; known: {sorted(SLO_DEFS)}")
        self.thresholds = dict(thresholds or {})

    @classmethod
    def from_options(cls, options) -> SloSet:
        thresholds: dict[str, float] = {}
        preset = getattr(options, "slo_preset", None)
        if preset:
            thresholds.update(PRESETS[preset])
        for d in SLO_DEFS.values():
            value = getattr(options, d.option, None)
            if value not in (None, ""):  # the web UI's form hands over strings, '' for an empty field
                thresholds[d.name] = float(value)
        return cls(thresholds)

    def __bool__(self) -> bool:
        return bool(self.thresholds)

    def request_meets(self, r: GenerationResult) -> bool:
        """True when an ok request meets every per-request objective (its own TTFT, ITL p95, decode span)."""
        if not r.ok:
            return False
        for name, threshold in self.thresholds.items():
            fn = SLO_DEFS[name].request_value
            if fn is None:
                continue
            value = fn(r)
            if value is not None and value > threshold:
                return False
        return True

    def evaluate(self, sketches: dict[str, LogSketch], error_rate: float) -> list[dict]:
        """One ``{"name", "threshold", "value", "passed"}`` per configured objective, from merged state."""
        checks = []
        for name, threshold in self.thresholds.items():
            d = SLO_DEFS[name]
            if d.metric is None:
                value: float | None = error_rate
            else:
                q = sketches[d.metric].quantile(d.quantile or 0.5)
                value = None if q is None else q * 1000.0
            passed = value is not None and value <= threshold
            checks.append({"name": name, "threshold": threshold, "value": value, "passed": passed})
        return checks


def failure_lines(checks: list[dict]) -> list[str]:
    """``CHECK FAILED: <name> <value> > <threshold> (threshold ...)`` for each failed check."""
    lines = []
    for c in checks:
        if c["passed"]:
            continue
        if c["value"] is None:
            lines.append(f"CHECK FAILED: {c['name']} has no data (threshold {c['threshold']:g})")
        else:
            lines.append(
                f"CHECK FAILED: {c['name']} {c['value']:.4g} > {c['threshold']:g} (threshold {c['threshold']:g})"
            )
    return lines
