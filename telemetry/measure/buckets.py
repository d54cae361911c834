"""Fixed-boundary histograms for the Prometheus exporter, with vLLM's own bucket boundaries.

The boundaries copy vLLM's V1 metric definitions (so a dashboard can put our client-side
histogram next to the server's), with sub-10 ms buckets added for inter-token latency and
TPOT (vLLM's ITL buckets start at 10 ms, which hides a 5 ms decode step):

- TTFT: vLLM ``vllm:time_to_first_token_seconds`` buckets.
- ITL / TPOT: vLLM ``vllm:inter_token_latency_seconds`` buckets + 1, 2.5, 5, 7.5 ms.
- E2E / decode span: vLLM's ``request_latency_buckets`` (``vllm:e2e_request_latency_seconds``,
  ``vllm:request_decode_time_seconds``).

Which metric uses which bounds is said once, in :mod:`telemetry.metrics` (``ClientMetric.bounds``).

    h = BucketHistogram(VLLM_TTFT)
    h.add_many(np.array([0.05, 0.3]))
    h.cumulative()  # [(le, cumulative count), ..., (inf, count)]
"""

from __future__ import annotations

import bisect
import math

import numpy as np

VLLM_TTFT = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
             40.0, 80.0, 160.0, 640.0, 2560.0)
VLLM_ITL = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0,
            80.0)
VLLM_REQUEST = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
                480.0, 960.0, 1920.0, 7680.0)
SUB_10MS = (0.001, 0.0025, 0.005, 0.0075)
RATIO = (0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0)
"""A ratio in [0, 1] (a request's draft acceptance)."""

class BucketHistogram:
    """Counts per fixed bucket (non-cumulative inside, cumulative on export) plus exact sum/count."""

    __slots__ = ("bounds", "_bounds", "counts", "sum", "count")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = np.asarray(bounds, dtype=np.float64)
        self._bounds = [float(b) for b in bounds]
        self.counts = np.zeros(len(bounds) + 1, dtype=np.int64)  # last = (max bound, +Inf)
        self.sum = 0.0
        self.count = 0

    def add_many(self, values: np.ndarray) -> None:
        v = np.asarray(values, dtype=np.float64).ravel()
        if v.size == 0:
            return
        # side="left": a value equal to a bound belongs to that bound's bucket (le is inclusive)
        self.counts += np.bincount(np.searchsorted(self.bounds, v, side="left"), minlength=self.counts.size)
        self.sum += float(v.sum())
        self.count += int(v.size)

    def add(self, value: float) -> None:
        self.counts[bisect.bisect_left(self._bounds, value)] += 1  # same bucket as searchsorted(side="left")
        self.sum += float(value)
        self.count += 1

    def merge(self, other: BucketHistogram) -> BucketHistogram:
        if self.counts.size != other.counts.size:
            raise ValueError("cannot merge histograms with different bucket boundaries")
        self.counts += other.counts
        self.sum += other.sum
        self.count += other.count
        return self

    def cumulative(self) -> list[tuple[float, int]]:
        """[(le, cumulative count)] ending with (+Inf, count), as Prometheus exposes them."""
        cum = np.cumsum(self.counts)
        les = [*self.bounds.tolist(), math.inf]
        return list(zip(les, cum.tolist(), strict=True))

    def to_dict(self) -> dict:
        return {"c": self.counts.tolist(), "s": self.sum, "n": self.count}

    @classmethod
    def from_dict(cls, bounds: tuple[float, ...], d: dict) -> BucketHistogram:
        h = cls(bounds)
        counts = np.asarray(d["c"], dtype=np.int64)
        if counts.size != h.counts.size:
            raise ValueError("histogram state does not match the bucket boundaries")
        h.counts, h.sum, h.count = counts, float(d["s"]), int(d["n"])
        return h
