"""A mergeable log-bucketed quantile sketch (DDSketch-style) with vectorized bulk insert.

Values (seconds, > 0) fall into buckets ``(gamma**(i-1), gamma**i]`` with ``gamma = (1+a)/(1-a)``;
a quantile answers the bucket's centre ``2*gamma**i/(gamma+1)``, within ``a`` (relative) of the
exact order statistic. Count, sum, min and max are exact. Indexes are clamped to
``[MIN_VALUE, MAX_VALUE]`` so one sketch never holds more than ~2,800 buckets (bounded memory),
and ``to_dict()`` gives plain ints/floats/lists for Locust's msgpack messages.

    s = LogSketch()
    s.add_many(np.array([0.012, 0.013, 0.011]))   # one bincount, no loop per value
    s.merge(LogSketch.from_dict(other.to_dict()))
    s.quantile(0.99), s.count, s.sum, s.min, s.max
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

DEFAULT_ALPHA = 0.005
"""Relative accuracy of a quantile (0.5 %, inside the 1 % the design asks for)."""
MIN_VALUE = 1e-6
"""Values at or below this (1 us) are counted as zero; the sketch never indexes below it."""
MAX_VALUE = 1e6
"""Values above this (11.6 days) are clamped into the top bucket; count/sum/max stay exact."""


class LogSketch:
    """Log-bucketed counts over a dense, growable index window, plus exact count/sum/min/max."""

    __slots__ = ("alpha", "_ln_gamma", "_lo_idx", "_hi_idx", "offset", "counts", "zero", "count", "sum", "min", "max")

    def __init__(self, alpha: float = DEFAULT_ALPHA) -> None:
        if not 0.0 < alpha < 0.5:
            raise ValueError(f"alpha must be in (0, 0.5), got {alpha}")
        self.alpha = alpha
        self._ln_gamma = math.log((1 + alpha) / (1 - alpha))
        self._lo_idx = math.ceil(math.log(MIN_VALUE) / self._ln_gamma)
        self._hi_idx = math.ceil(math.log(MAX_VALUE) / self._ln_gamma)
        self.offset = 0
        """Bucket index of ``counts[0]``."""
        self.counts = np.zeros(0, dtype=np.int64)
        self.zero = 0
        """Values <= MIN_VALUE."""
        self.count = 0
        self.sum = 0.0
        self.min = math.inf
        self.max = -math.inf

    # ---- ingestion -------------------------------------------------------------------------
    def add(self, value: float) -> None:
        """Insert one value (a scalar fast path of :meth:`add_many`)."""
        v = float(value)
        self.count += 1
        self.sum += v
        if v < self.min:
            self.min = v
        if v > self.max:
            self.max = v
        if v <= MIN_VALUE:
            self.zero += 1
            return
        i = math.ceil(math.log(v) / self._ln_gamma)
        if i < self._lo_idx or i > self._hi_idx:
            i = min(max(i, self._lo_idx), self._hi_idx)
        j = i - self.offset
        if j < 0 or j >= self.counts.size:  # outside the window (or none yet): widen it
            self._grow(i, i)
            j = i - self.offset
        self.counts[j] += 1

    def add_many(self, values: np.ndarray | Iterable[float]) -> None:
        """Insert an array of values with one log, one bincount and one slice add."""
        v = np.asarray(values, dtype=np.float64).ravel()
        if v.size == 0:
            return
        vmin, vmax = float(v.min()), float(v.max())
        if vmin <= MIN_VALUE:
            pos = v[v > MIN_VALUE]
            zero = int(v.size - pos.size)
        else:
            pos, zero = v, 0
        lo, binned = self.bin(pos)
        self.add_binned(lo, binned, int(v.size), float(v.sum()), vmin, vmax, zero)

    def bin(self, positive: np.ndarray) -> tuple[int, np.ndarray]:
        """(first index, counts per index) of values all > MIN_VALUE; reusable across sketches of this alpha."""
        if positive.size == 0:
            return 0, np.zeros(0, dtype=np.int64)
        idx, lo, hi = self.index_range(np.log(positive))
        return lo, np.bincount(idx - lo, minlength=hi - lo + 1)

    def index_range(self, log_values: np.ndarray) -> tuple[np.ndarray, int, int]:
        """(bucket index of each value, lowest, highest) from natural logs already taken (one log serves sketches of
        several accuracies), clamped to the bounded range; one min and one max over the indexes. Not empty."""
        idx = np.ceil(log_values / self._ln_gamma).astype(np.int64)
        lo, hi = int(idx.min()), int(idx.max())
        if lo < self._lo_idx or hi > self._hi_idx:
            np.minimum(np.maximum(idx, self._lo_idx, out=idx), self._hi_idx, out=idx)
            lo, hi = min(max(lo, self._lo_idx), self._hi_idx), min(max(hi, self._lo_idx), self._hi_idx)
        return idx, lo, hi

    def add_binned(self, lo: int, binned: np.ndarray, count: int, total: float, vmin: float, vmax: float,
                   zero: int = 0) -> None:
        """Add pre-binned counts (from :meth:`bin`) with the exact count/sum/min/max of the values behind them."""
        if count == 0:
            return
        self.count += count
        self.sum += total
        if vmin < self.min:
            self.min = vmin
        if vmax > self.max:
            self.max = vmax
        self.zero += zero
        if binned.size:
            self._grow(lo, lo + binned.size - 1)
            start = lo - self.offset
            self.counts[start : start + binned.size] += binned

    def _grow(self, lo: int, hi: int) -> None:
        if self.counts.size == 0:
            self.offset = lo
            self.counts = np.zeros(hi - lo + 1, dtype=np.int64)
            return
        cur_hi = self.offset + self.counts.size - 1
        if lo >= self.offset and hi <= cur_hi:
            return
        new_lo, new_hi = min(lo, self.offset), max(hi, cur_hi)
        grown = np.zeros(new_hi - new_lo + 1, dtype=np.int64)
        grown[self.offset - new_lo : self.offset - new_lo + self.counts.size] = self.counts
        self.offset, self.counts = new_lo, grown

    # ---- merging and serialization ------------------------------------------------------------
    def merge(self, other: LogSketch) -> LogSketch:
        """Add ``other`` into this sketch (same alpha); the result equals a sketch of the union."""
        if other.alpha != self.alpha:
            raise ValueError(f"cannot merge sketches of different accuracy ({self.alpha} vs {other.alpha})")
        if other.count == 0:
            return self
        self.count += other.count
        self.sum += other.sum
        self.min = min(self.min, other.min)
        self.max = max(self.max, other.max)
        self.zero += other.zero
        if other.counts.size:
            self._grow(other.offset, other.offset + other.counts.size - 1)
            start = other.offset - self.offset
            self.counts[start : start + other.counts.size] += other.counts
        return self

    def copy(self) -> LogSketch:
        return LogSketch(self.alpha).merge(self)

    def to_dict(self) -> dict:
        """Plain data (ints, floats, lists) with leading/trailing empty buckets trimmed."""
        nz = np.flatnonzero(self.counts)
        if nz.size:
            first, last = int(nz[0]), int(nz[-1])
            offset, counts = self.offset + first, self.counts[first : last + 1].tolist()
        else:
            offset, counts = 0, []
        return {
            "a": self.alpha,
            "o": offset,
            "c": counts,
            "z": self.zero,
            "n": self.count,
            "s": self.sum,
            "lo": self.min if self.count else None,
            "hi": self.max if self.count else None,
        }

    @classmethod
    def from_dict(cls, d: dict) -> LogSketch:
        s = cls(float(d["a"]))
        s.offset = int(d["o"])
        s.counts = np.asarray(d["c"], dtype=np.int64)
        s.zero = int(d["z"])
        s.count = int(d["n"])
        s.sum = float(d["s"])
        if s.count:
            s.min, s.max = float(d["lo"]), float(d["hi"])
        return s

    # ---- queries -------------------------------------------------------------------------
    @property
    def mean(self) -> float | None:
        return self.sum / self.count if self.count else None

    def quantile(self, q: float) -> float | None:
        """The value at rank ``q*(count-1)`` within ``alpha`` relative error; None when empty."""
        if self.count == 0:
            return None
        if not 0.0 <= q <= 1.0:
            raise ValueError(f"quantile must be in [0, 1], got {q}")
        if q == 0.0:
            return self.min
        if q == 1.0:
            return self.max
        rank = q * (self.count - 1)
        if rank < self.zero:
            return max(self.min, 0.0) if self.min <= MIN_VALUE else self.min
        cum = np.cumsum(self.counts)
        pos = int(np.searchsorted(cum, rank - self.zero, side="right"))
        pos = min(pos, self.counts.size - 1)
        value = 2.0 * math.exp((self.offset + pos) * self._ln_gamma) / (1.0 + math.exp(self._ln_gamma))
        return min(max(value, self.min), self.max)

    def quantiles(self, qs: Iterable[float]) -> list[float | None]:
        return [self.quantile(q) for q in qs]

    def bucket_values(self) -> tuple[np.ndarray, np.ndarray]:
        """(representative values, counts) of the non-empty buckets, zero bucket included, for plotting."""
        nz = np.flatnonzero(self.counts)
        gamma = math.exp(self._ln_gamma)
        values = 2.0 * np.exp((self.offset + nz) * self._ln_gamma) / (1.0 + gamma)
        counts = self.counts[nz]
        if self.zero:
            values = np.concatenate(([0.0], values))
            counts = np.concatenate(([self.zero], counts))
        return values, counts

    def bins(self, max_bins: int) -> tuple[np.ndarray, np.ndarray]:
        """(edges, counts) of at most ``max_bins`` bins over the data's own range, for a histogram plot.

        A bin is a run of whole buckets (``k`` of them, the fewest that make ``max_bins`` enough), so no bin holds a
        fraction of a bucket and a narrow distribution keeps every bucket of its shape; the outer edges are the
        exact min and max. Values at or below MIN_VALUE (the zero bucket) are left out. Empty sketch: two empty
        arrays."""
        nz = np.flatnonzero(self.counts)
        if nz.size == 0 or max_bins < 1:
            return np.zeros(0), np.zeros(0, dtype=np.int64)
        first, last = int(nz[0]), int(nz[-1])
        k = max(1, math.ceil((last - first + 1) / max_bins))
        n = math.ceil((last - first + 1) / k)
        counts = np.zeros(n * k, dtype=np.int64)
        counts[: last - first + 1] = self.counts[first : last + 1]
        binned = counts.reshape(n, k).sum(axis=1)
        edges = np.exp((self.offset + first - 1 + k * np.arange(n + 1)) * self._ln_gamma)
        lo, hi = max(self.min, MIN_VALUE), self.max
        if hi > lo:  # the exact range; a bucket's bounds when every value is the same
            edges[0], edges[-1] = max(edges[0], lo), min(edges[-1], hi)
        return edges, binned

    def __repr__(self) -> str:
        return f"LogSketch(n={self.count}, p50={self.quantile(0.5)}, max={self.max if self.count else None})"
