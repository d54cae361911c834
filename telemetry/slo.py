"""Service-level objectives: thresholds from options or a preset, per-request goodput checks, and
the end-of-run gate (``CHECK FAILED: ...`` lines and exit code 3 on the master).

    slos = SloSet.from_options(parsed_options)       # --slo-ttft-p99-ms 800 / --slo-preset interactive
    slos.request_meets(result)                         # every per-request objective met? (goodput)
    checks = slos.evaluate(ttft=..., itl=..., decode_span=..., error_rate=...)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from telemetry.measure.sketch import LogSketch
from users.result import GenerationResult

EXIT_CODE = 3


@dataclass(frozen=True, slots=True)
class SloDef:
    """One objective: the merged metric it reads (a registry key), its quantile, and how to judge a single request.
    Its name is the metric's: ``<key>_p<NN>_ms`` (``error_rate`` for the one without a metric), its option
    ``--slo-<name>``."""

    metric: str | None
    """Registry key of the metric the objective reads (None for error_rate)."""
    quantile: float | None
    request_value: Callable[[GenerationResult], float | None] | None
    """A request's own value in the objective's unit (ms), for goodput; None if not per-request."""

    @property
    def name(self) -> str:
        return "error_rate" if self.metric is None else f"{self.metric}_p{(self.quantile or 0) * 100:g}_ms"

    @property
    def option(self) -> str:
        """The parsed option's attribute."""
        return f"slo_{self.name}"


def _ttft_ms(r: GenerationResult) -> float | None:
    return None if r.ttft_s is None else r.ttft_s * 1000.0


def _ttfa_ms(r: GenerationResult) -> float | None:
    return None if r.ttfa_s is None else r.ttfa_s * 1000.0


def _itl_p95_ms(r: GenerationResult) -> float | None:
    s = r.itl_samples()
    return float(np.quantile(s, 0.95)) * 1000.0 if s.size else None


def _span_ms(r: GenerationResult) -> float | None:
    return None if r.decode_span_s is None else r.decode_span_s * 1000.0


SLO_DEFS: dict[str, SloDef] = {
    d.name: d
    for d in (
        SloDef("ttft", 0.99, _ttft_ms),
        SloDef("ttfa", 0.99, _ttfa_ms),
        SloDef("itl", 0.95, _itl_p95_ms),
        SloDef("decode_span", 0.99, _span_ms),
        SloDef(None, None, None),
    )
}

PRESETS: dict[str, dict[str, float]] = {
    "interactive": {"ttft_p99_ms": 800.0, "itl_p95_ms": 120.0, "decode_span_p99_ms": 2500.0},
}
"""``--slo-preset`` values. ``interactive``: an interactive chat service — the first token within 0.8 s, a steady
stream (ITL p95 120 ms) and no more than 2.5 s between a reply's first and last token at p99."""
PRESET_ALIASES: dict[str, str] = {"seed": "interactive"}
"""Older preset names still accepted (``seed``: the project's founding article's table)."""
NO_PRESET = "none"
"""``--slo-preset none`` (the default): no preset thresholds, only the explicit ``--slo-*`` options. A choice of its
own so the web UI's drop-down can offer "no SLO" (a select always submits one of its choices)."""
PRESET_CHOICES = (NO_PRESET, *sorted(PRESETS), *sorted(PRESET_ALIASES))
WHEN_REASONING: dict[str, tuple[str, str]] = {"interactive": ("ttft_p99_ms", "ttfa_p99_ms")}
"""A preset's threshold that also applies to another objective when the model reasons: the interactive preset's
TTFT threshold bounds the time to the first ANSWER token of an R1-style model too."""


class SloSet:
    """The configured thresholds (name -> value); empty when no SLO was asked for."""

    def __init__(self, thresholds: dict[str, float] | None = None, when_reasoning: set[str] | None = None) -> None:
        unknown = set(thresholds or {}) - set(SLO_DEFS)
        if unknown:
            raise ValueError(f"unknown SLO names {sorted(unknown)}; known: {sorted(SLO_DEFS)}")
        self.thresholds = dict(thresholds or {})
        self.when_reasoning = frozenset(when_reasoning or ())
        """Objectives that apply only when the model reasons (a request with reasoning; a run with a thinking
        span): the interactive preset's TTFA."""

    @classmethod
    def from_options(cls, options) -> SloSet:
        thresholds: dict[str, float] = {}
        reasoning: set[str] = set()
        preset = getattr(options, "slo_preset", None)
        preset = PRESET_ALIASES.get(preset, preset)
        if preset and preset != NO_PRESET:
            thresholds.update(PRESETS[preset])
            if preset in WHEN_REASONING:
                src, dst = WHEN_REASONING[preset]
                thresholds[dst] = thresholds[src]
                reasoning.add(dst)
        for d in SLO_DEFS.values():
            value = getattr(options, d.option, None)
            if value not in (None, ""):  # the web UI's form hands over strings, '' for an empty field
                thresholds[d.name] = float(value)
                reasoning.discard(d.name)
        return cls(thresholds, reasoning)

    def __bool__(self) -> bool:
        return bool(self.thresholds)

    def request_meets(self, r: GenerationResult) -> bool:
        """True when an ok request meets every per-request objective (its own TTFT, ITL p95, decode span)."""
        if not r.ok:
            return False
        for name, threshold in self.thresholds.items():
            fn = SLO_DEFS[name].request_value
            if fn is None or (name in self.when_reasoning and r.t_reasoning is None):
                continue
            value = fn(r)
            if value is not None and value > threshold:
                return False
        return True

    def evaluate(self, sketches: dict[str, LogSketch], error_rate: float) -> list[dict]:
        """One ``{"name", "threshold", "value", "passed"}`` per configured objective, from merged state."""
        checks = []
        reasons = bool(sketches["thinking"].count) if "thinking" in sketches else False
        for name, threshold in self.thresholds.items():
            d = SLO_DEFS[name]
            if name in self.when_reasoning and not reasons:
                continue
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


def verdict_line(slo: dict) -> str | None:
    """``SLO passed: ttft_p99_ms 412 <= 800: ok, ...`` from a summary's ``slo`` section; None without objectives.
    The console table's line, the web UI's log line at the end of a run and the LLM tab's SLO card."""
    checks = slo.get("checks") or []
    if not checks:
        return None
    parts = ", ".join(
        f"{c['name']} {'-' if c['value'] is None else format(c['value'], '.4g')} <= {c['threshold']:g}: "
        f"{'ok' if c['passed'] else 'no'}"
        for c in checks
    )
    return f"SLO {'passed' if slo.get('passed') else 'FAILED'}: {parts}"
