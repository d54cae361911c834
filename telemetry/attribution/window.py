"""Time windows that put client latency next to what the server was doing at the same time.

A :class:`ClientWindow` holds the client's figures for ``[start_s, end_s)`` (seconds since the run
started); a :class:`ServerSample` is one scrape of the server's ``/metrics``. :func:`align` joins them
into :class:`Window` rows: the median of ``num_requests_running`` (the batch size), the most requests
waiting, the highest KV-cache usage, the preemptions counted in the window, and the window's share of
each cumulative server histogram (the difference between the last scrape at or before each edge).

    windows = align(client_windows, server_samples)
    [w.ttft_p99_ms for w in windows], [w.running_median for w in windows]
"""

from __future__ import annotations

import statistics
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from telemetry.attribution.histogram import CumulativeHistogram

# Server histograms the attribution reads, by short name (see telemetry's scraper for the vLLM names).
SERVER_HISTOGRAMS = ("queue", "prefill", "decode", "ttft", "itl", "e2e", "kv_transfer")


@dataclass(frozen=True, slots=True)
class ClientWindow:
    """Client figures of one window (milliseconds; None where the window had no sample)."""

    start_s: float
    end_s: float
    requests: int = 0
    """Requests that finished in the window."""
    ttft_p50_ms: float | None = None
    ttft_p99_ms: float | None = None
    itl_p50_ms: float | None = None
    itl_p99_ms: float | None = None


@dataclass(frozen=True, slots=True)
class ServerSample:
    """One scrape of the server, ``t`` seconds after the run started. Gauges may be missing (None)."""

    t: float
    running: float | None = None
    waiting: float | None = None
    kv_usage: float | None = None
    """0..1"""
    preemptions_total: float | None = None
    histograms: Mapping[str, CumulativeHistogram] = field(default_factory=dict)
    """Cumulative histograms by short name (:data:`SERVER_HISTOGRAMS`)."""


@dataclass(frozen=True, slots=True)
class Window:
    """A client window joined with the server signals of the same time span."""

    index: int
    client: ClientWindow
    samples: int = 0
    """Server scrapes that fell in the window."""
    running_median: float | None = None
    waiting_max: float | None = None
    kv_usage_max: float | None = None
    preemptions: float | None = None
    server: Mapping[str, CumulativeHistogram] = field(default_factory=dict)
    """The window's share of each server histogram (deltas)."""

    @property
    def start_s(self) -> float:
        return self.client.start_s

    @property
    def end_s(self) -> float:
        return self.client.end_s

    @property
    def requests(self) -> int:
        return self.client.requests

    @property
    def request_rate(self) -> float:
        span = self.end_s - self.start_s
        return self.requests / span if span > 0 else 0.0

    def metric(self, name: str) -> float | None:
        """A client figure by name, e.g. ``ttft_p99_ms``."""
        return getattr(self.client, name)


def _values(samples: Sequence[ServerSample], attr: str) -> list[float]:
    return [v for s in samples if (v := getattr(s, attr)) is not None]


def _last_at_or_before(times: list[float], samples: Sequence[ServerSample], t: float) -> ServerSample | None:
    i = bisect_right(times, t)
    return samples[i - 1] if i else None


def _counter_delta(first: float | None, last: float | None) -> float | None:
    if last is None:
        return None
    if first is None:
        return None
    return last if last < first else last - first  # a counter that went down: the server restarted


def _hist_deltas(before: ServerSample | None, after: ServerSample | None) -> dict[str, CumulativeHistogram]:
    if after is None:
        return {}
    out: dict[str, CumulativeHistogram] = {}
    for name, h in after.histograms.items():
        prev = before.histograms.get(name) if before is not None else None
        if prev is None:
            continue
        try:
            out[name] = h - prev
        except ValueError:  # bucket layout changed between scrapes: nothing trustworthy for this window
            continue
    return out


def align(client: Sequence[ClientWindow], samples: Sequence[ServerSample]) -> list[Window]:
    """Join client windows with the server scrapes (sorted by ``t``) that fall in each of them."""
    samples = sorted(samples, key=lambda s: s.t)
    times = [s.t for s in samples]
    windows: list[Window] = []
    for i, cw in enumerate(client):
        lo, hi = bisect_right(times, cw.start_s - 1e-9), bisect_right(times, cw.end_s - 1e-9)
        inside = samples[lo:hi]
        # The scrape at the window's start edge; for the first window, the first scrape inside it.
        before = _last_at_or_before(times, samples, cw.start_s - 1e-9) or (inside[0] if inside else None)
        after = _last_at_or_before(times, samples, cw.end_s - 1e-9)
        running = _values(inside, "running")
        waiting = _values(inside, "waiting")
        kv = _values(inside, "kv_usage")
        pre_first = before.preemptions_total if before is not None else None
        pre_last = after.preemptions_total if after is not None else None
        windows.append(
            Window(
                index=i,
                client=cw,
                samples=len(inside),
                running_median=statistics.median(running) if running else None,
                waiting_max=max(waiting) if waiting else None,
                kv_usage_max=max(kv) if kv else None,
                preemptions=_counter_delta(pre_first, pre_last) if inside else None,
                server=_hist_deltas(before, after) if inside else {},
            )
        )
    return windows
