"""Aligning client windows with server scrapes."""

from __future__ import annotations

import math

import pytest

from telemetry.attribution.histogram import CumulativeHistogram
from telemetry.attribution.window import ClientWindow, ServerSample, align


def _hist(fast: int, slow: int) -> CumulativeHistogram:
    return CumulativeHistogram.from_buckets({0.1: fast, 1.0: fast + slow, math.inf: fast + slow})


def test_align_gauges_counters_and_histogram_deltas():
    samples = [
        ServerSample(t, running=r, waiting=wq, kv_usage=kv, preemptions_total=p, histograms={"queue": _hist(f, s)})
        for t, r, wq, kv, p, f, s in [
            (0.5, 4, 0, 0.1, 0, 0, 0),
            (3.0, 8, 1, 0.4, 0, 5, 0),
            (6.0, 16, 0, 0.5, 2, 10, 0),
            (11.0, 2, 30, 0.99, 9, 12, 20),
            (14.0, 3, 41, 0.97, 12, 12, 30),
        ]
    ]
    client = [ClientWindow(0, 10, 5), ClientWindow(10, 20, 7), ClientWindow(20, 30, 0)]
    w0, w1, w2 = align(client, samples)
    assert (w0.samples, w0.running_median, w0.waiting_max, w0.kv_usage_max) == (3, 8, 1, 0.5)
    assert w0.preemptions == 2  # from the first scrape in the run
    assert w0.server["queue"].count == 10
    assert (w1.samples, w1.running_median, w1.waiting_max, w1.kv_usage_max) == (2, 2.5, 41, 0.99)
    assert w1.preemptions == 10  # 12 at t=14 minus 2 at t=6 (the last scrape before the window)
    assert w1.server["queue"].count == 32  # 12+30 - 10
    assert w1.server["queue"].quantile(0.5) * 1000 == pytest.approx(100 + 900 * (16 - 2) / 30)
    assert w1.request_rate == pytest.approx(0.7)
    assert w2.samples == 0 and w2.running_median is None and w2.preemptions is None and w2.server == {}


def test_align_without_server_metrics():
    (w,) = align([ClientWindow(0, 10, 3, ttft_p99_ms=120.0)], [])
    assert w.running_median is None and w.kv_usage_max is None and w.metric("ttft_p99_ms") == 120.0
