"""Cumulative Prometheus histograms: deltas between two scrapes and quantiles from the buckets.

vLLM exports its queue / prefill / decode / TTFT / ITL times as cumulative histograms. The time spent
in a window is the bucket-wise difference of two scrapes; a quantile is read from that difference the
way Prometheus' ``histogram_quantile`` does it: find the bucket holding the rank and interpolate
linearly inside it (lower edge 0 for the first bucket; a rank in the ``+Inf`` bucket gives the highest
finite bound).

    h0 = CumulativeHistogram.from_buckets({0.1: 3, 0.5: 7, inf: 8}, total_sum=1.9)
    h1 = CumulativeHistogram.from_buckets({0.1: 5, 0.5: 15, inf: 17}, total_sum=4.2)
    d = h1 - h0                  # what happened between the two scrapes
    d.quantile(0.99)             # seconds
    d.to_q(scale=1000.0)         # Q object of docs/summary.schema.json in milliseconds
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

QUANTILES = {"p50": 0.50, "p90": 0.90, "p95": 0.95, "p99": 0.99}


@dataclass(frozen=True, slots=True)
class CumulativeHistogram:
    """Upper bounds (ascending, the last one ``+inf``) with cumulative counts, and the sum of values."""

    bounds: tuple[float, ...]
    cumulative: tuple[float, ...]
    total_sum: float | None = None

    @classmethod
    def from_buckets(cls, buckets: Mapping[float | str, float], total_sum: float | None = None) -> CumulativeHistogram:
        """Build from ``{le: cumulative count}``; ``le`` may be a Prometheus label string ("0.5", "+Inf")."""
        pairs = sorted((float(le), float(c)) for le, c in buckets.items())
        if not pairs or not math.isinf(pairs[-1][0]):
            top = pairs[-1][1] if pairs else 0.0
            pairs.append((math.inf, top))
        return cls(tuple(b for b, _ in pairs), tuple(c for _, c in pairs), total_sum)

    @property
    def count(self) -> float:
        return self.cumulative[-1] if self.cumulative else 0.0

    def __sub__(self, earlier: CumulativeHistogram) -> CumulativeHistogram:
        """Observations between ``earlier`` and this scrape. A counter reset (a count went down) means the
        server restarted: then everything in this scrape is new."""
        if earlier.bounds != self.bounds:
            raise ValueError("histograms with different bucket bounds cannot be subtracted")
        diff = tuple(a - b for a, b in zip(self.cumulative, earlier.cumulative, strict=True))
        if any(d < 0 for d in diff):
            return self
        s = None
        if self.total_sum is not None and earlier.total_sum is not None:
            s = self.total_sum - earlier.total_sum
        return CumulativeHistogram(self.bounds, diff, s)

    def _locate(self, q: float) -> tuple[float, float, float, float, float] | None:
        """(lower bound, upper bound, rank, cumulative count below, cumulative count at upper) of the
        bucket holding quantile ``q``; None when the histogram is empty or ``q`` is out of range."""
        total = self.count
        if total <= 0 or not 0.0 <= q <= 1.0:
            return None
        rank = q * total
        prev_bound, prev_cum = 0.0, 0.0
        for bound, cum in zip(self.bounds, self.cumulative, strict=True):
            if cum >= rank and cum > prev_cum:
                return prev_bound, bound, rank, prev_cum, cum
            prev_bound, prev_cum = bound, cum
        return None

    def quantile(self, q: float) -> float | None:
        """Prometheus ``histogram_quantile``; None when the histogram is empty."""
        found = self._locate(q)
        if found is None:
            return None
        lower, upper, rank, below, at = found
        if math.isinf(upper):
            return lower if len(self.bounds) > 1 else None
        if upper <= 0:
            return upper
        return lower + (upper - lower) * (rank - below) / (at - below)

    def quantile_bucket(self, q: float) -> tuple[float, float] | None:
        """The bucket ``(lower, upper]`` holding quantile ``q``: what the histogram knows for sure (the
        interpolated :meth:`quantile` is an estimate inside it)."""
        found = self._locate(q)
        return None if found is None else (found[0], found[1])

    def mean(self) -> float | None:
        if self.total_sum is None or self.count <= 0:
            return None
        return self.total_sum / self.count

    def to_q(self, scale: float = 1000.0) -> dict:
        """The summary schema's Q object (``scale`` 1000 turns seconds into ms). ``max`` is None: a histogram only
        bounds it, it does not know it. Extra key ``bucket``: per quantile the ``[lower, upper]`` bucket
        edges it lies in (upper None = above the last finite bound) — the interpolated value is an estimate
        inside it, and null when the bucket is the first (0, b] or the open last one: there it would be a guess
        (any p99 in vLLM's first queue-time bucket (0, 0.3 s] would read as up to 297 ms)."""
        q: dict = {"count": int(round(self.count))}
        mean = self.mean()
        q["mean"] = None if mean is None else mean * scale
        buckets = {}
        for key, p in QUANTILES.items():
            b = self.quantile_bucket(p)
            buckets[key] = None if b is None else [b[0] * scale, None if math.isinf(b[1]) else b[1] * scale]
            v = self.quantile(p)
            # a rank in the first bucket (0, b] or the open last one has no shape to interpolate in: only the
            # bucket is known (vLLM's queue time: a p50 "of 152 ms" inside (0, 300] beside a 35 ms mean)
            honest = b is not None and b[0] > 0 and not math.isinf(b[1])
            q[key] = None if v is None or not honest else v * scale
        q["max"] = None
        q["bucket"] = buckets
        return q
