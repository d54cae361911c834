"""``--route-fallback``: the grammar of a gray release's fallback rule (the master evaluates it:
:mod:`telemetry.control.routing`).

    FROM->TO when COND [or COND ...] [for N windows] [of SECONDS s]

    COND:  METRIC > +P%      FROM's value is more than P % above TO's in the same window
           METRIC > X[ms|%]  FROM's value is above X (ms for a latency, % or a fraction for error_rate)
    METRIC: error_rate, or a latency quantile <metric>_p<q> such as ttft_p99, e2e_p90, tpot_p50

The conditions are OR-ed per window; the rule fires when N consecutive windows (default 1) are flagged, and the
failing version's buckets then go to TO for the rest of the run. The window length is ``of SECONDS s`` or else
``--attribution-window``.

    >>> rule = FallbackRule.parse("beta->v1 when ttft_p99>+20% or error_rate>1% for 2 windows")
    >>> rule.source, rule.target, rule.windows, [c.text for c in rule.conditions]
    ('beta', 'v1', 2, ['ttft_p99>+20%', 'error_rate>1%'])
"""

from __future__ import annotations

import re
from dataclasses import dataclass

FALLBACK_FORM = ("'FROM->TO when METRIC>+P% [or METRIC>X ...] [for N windows] [of S s]' with METRIC error_rate or "
                 "<metric>_p<q> (e.g. 'beta->v1 when ttft_p99>+20% or error_rate>1% for 2 windows')")
ERROR_RATE = "error_rate"

_VERSION = r"[A-Za-z0-9][A-Za-z0-9._-]*"
_RULE = re.compile(
    rf"^\s*(?P<src>{_VERSION})\s*->\s*(?P<dst>{_VERSION})\s+when\s+(?P<conds>.+?)"
    r"(?:\s+for\s+(?P<n>\d+)\s+windows?)?(?:\s+of\s+(?P<w>\d+(?:\.\d+)?)\s*s)?\s*$",
    re.IGNORECASE,
)
_COND = re.compile(r"^\s*(?P<metric>[a-z][a-z0-9_]*?)\s*>\s*(?P<rel>\+)?(?P<num>\d+(?:\.\d+)?)\s*(?P<unit>%|ms)?\s*$")
_QUANTILE = re.compile(r"^(?P<key>[a-z][a-z0-9_]*)_p(?P<q>\d{1,2}(?:\.\d+)?)$")


@dataclass(frozen=True)
class Condition:
    """One ``METRIC > ...`` test on a window."""

    text: str
    metric: str
    """``error_rate`` or the client metric's key (``ttft``)."""
    quantile: float | None
    """0..1 for a latency metric, None for error_rate."""
    relative: bool
    """True: compare with TO's value in the same window; ``limit`` is then the allowed rise (0.2 for +20%)."""
    limit: float
    """Seconds for a latency, a fraction for error_rate, the rise for a relative test."""

    def breached(self, value: float | None, reference: float | None) -> bool | None:
        """True/False, or None when the window cannot judge it (no value, or no reference for a relative test)."""
        if value is None:
            return None
        if self.relative:
            if reference is None:
                return None
            return value > reference * (1.0 + self.limit)
        return value > self.limit


@dataclass(frozen=True)
class FallbackRule:
    source: str
    """The version that falls back (its buckets move)."""
    target: str
    """The version that takes them."""
    conditions: tuple[Condition, ...]
    windows: int = 1
    """Consecutive flagged windows needed."""
    window_s: float | None = None
    """``of S s``; None: --attribution-window."""
    text: str = ""

    @classmethod
    def parse(cls, text: str, metrics: frozenset[str] | None = None) -> FallbackRule:
        """Parse; ``metrics`` (the latency keys a window holds) restricts the quantile metrics. ValueError names
        the accepted form."""
        m = _RULE.match(text or "")
        if not m:
            raise ValueError(f"bad fallback rule {text!r}; expected {FALLBACK_FORM}")
        src, dst = m["src"], m["dst"]
        if src == dst:
            raise ValueError(f"fallback rule {text!r} falls back to the same version; expected {FALLBACK_FORM}")
        conds = tuple(_condition(c, metrics) for c in re.split(r"\s+or\s+", m["conds"], flags=re.IGNORECASE))
        n = int(m["n"]) if m["n"] else 1
        w = float(m["w"]) if m["w"] else None
        if n < 1 or (w is not None and w <= 0):
            raise ValueError(f"fallback rule {text!r}: windows must be >= 1 and seconds > 0; expected {FALLBACK_FORM}")
        return cls(src, dst, conds, n, w, " ".join(text.split()))


def _condition(text: str, metrics: frozenset[str] | None) -> Condition:
    m = _COND.match(text.lower())
    if not m:
        raise ValueError(f"bad condition {text.strip()!r}; expected {FALLBACK_FORM}")
    metric, rel, num, unit = m["metric"], bool(m["rel"]), float(m["num"]), m["unit"]
    clean = text.strip().replace(" ", "")
    if metric == ERROR_RATE:
        if rel:
            if unit != "%":
                raise ValueError(f"bad condition {clean!r}: a relative test is +P%; expected {FALLBACK_FORM}")
            return Condition(clean, ERROR_RATE, None, True, num / 100)
        if unit == "ms":
            raise ValueError(f"bad condition {clean!r}: error_rate is a % or a fraction; expected {FALLBACK_FORM}")
        limit = num / 100 if unit == "%" else num
        if limit > 1:
            raise ValueError(f"bad condition {clean!r}: error_rate is at most 100%; expected {FALLBACK_FORM}")
        return Condition(clean, ERROR_RATE, None, False, limit)
    q = _QUANTILE.match(metric)
    if not q or not 0 < float(q["q"]) < 100:
        raise ValueError(f"bad metric {metric!r} (error_rate or <metric>_p<q>); expected {FALLBACK_FORM}")
    if metrics is not None and q["key"] not in metrics:
        raise ValueError(f"metric {q['key']!r} is not judged per window (one of {', '.join(sorted(metrics))}); "
                         f"expected {FALLBACK_FORM}")
    if rel:
        if unit != "%":
            raise ValueError(f"bad condition {clean!r}: a relative test is +P%; expected {FALLBACK_FORM}")
        return Condition(clean, q["key"], float(q["q"]) / 100, True, num / 100)
    if unit == "%":
        raise ValueError(f"bad condition {clean!r}: a latency limit is in ms; expected {FALLBACK_FORM}")
    return Condition(clean, q["key"], float(q["q"]) / 100, False, num / 1000)
