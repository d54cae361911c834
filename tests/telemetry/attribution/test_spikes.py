"""Spike report: which windows spiked, and the cause named from the server signals of the same window."""

from __future__ import annotations

import time

import pytest

from telemetry.attribution.spikes import SpikeRule, find_spikes
from tests.telemetry.attribution.helpers import steady, win


def _with(ws, i, w):
    ws[i] = w
    return ws


def test_kv_exhaustion_spike_names_waiting_kv_and_preemptions():
    ws = _with(steady(10), 6, win(6, ttft_p99=1240.0, running=9, waiting=41, kv=0.99, preemptions=12))
    (s,) = find_spikes(ws)
    assert (s["start_s"], s["end_s"], s["metric"], s["window"]) == (60.0, 70.0, "ttft_p99_ms", 6)
    assert s["ratio"] == pytest.approx(3.1)
    assert s["category"] == "preemption"
    assert s["cause"].startswith("TTFT p99 3.1× at t=60–70s with 41 waiting, KV 0.99, 12 preemptions")
    assert s["server"]["waiting_max"] == 41 and s["server"]["kv_usage_max"] == 0.99
    assert s["server"]["preemptions"] == 12


def test_cause_categories():
    cases = {
        "kv_pressure": win(5, ttft_p99=1600, kv=0.97, waiting=5),
        "queueing": win(5, ttft_p99=1600, kv=0.6, waiting=20),
        "batching": win(5, ttft_p99=1600, kv=0.2, waiting=14, running=1),
        "unknown": win(5, ttft_p99=1600, kv=0.5, waiting=0),
    }
    for category, w in cases.items():
        (s,) = find_spikes(_with(steady(9), 5, w))
        assert s["category"] == category, (category, s["cause"])
        assert s["cause"].endswith(category.replace("_", " "))


def test_itl_spike_and_wall_clock_label():
    ws = _with(steady(8), 3, win(3, itl_p99=95.0, kv=0.99, preemptions=3))
    start = time.mktime((2025, 1, 2, 12, 3, 0, 0, 0, -1))
    (s,) = find_spikes(ws, wall_start=start)
    assert s["metric"] == "itl_p99_ms"
    assert "ITL p99 3.2× at 12:03:30–12:03:40" in s["cause"]


def test_factor_is_a_parameter_and_steady_runs_have_no_spikes():
    ws = _with(steady(9), 4, win(4, ttft_p99=700.0))
    assert find_spikes(ws) == []  # 1.75x < 2
    (s,) = find_spikes(ws, SpikeRule(factor=1.5))
    assert s["ratio"] == pytest.approx(1.75)


def test_too_few_windows_and_no_server_metrics():
    assert find_spikes([win(0), win(1, ttft_p99=5000)]) == []
    ws = [win(i, ttft_p99=400, running=None, waiting=None, kv=None, preemptions=None) for i in range(6)]
    ws[2] = win(2, ttft_p99=2000, running=None, waiting=None, kv=None, preemptions=None)
    (s,) = find_spikes(ws)
    assert s["category"] == "unknown" and "no server metrics" in s["cause"]


def test_server_queue_p99_is_stated_as_its_bucket():
    import dataclasses
    import math

    from telemetry.attribution.histogram import CumulativeHistogram

    quick = CumulativeHistogram.from_buckets({0.3: 50, 0.5: 50, 0.8: 50, math.inf: 50})
    slow = CumulativeHistogram.from_buckets({0.3: 10, 0.5: 10, 0.8: 50, math.inf: 50})
    for hist, text in ((quick, "server queue p99 ≤300 ms"), (slow, "server queue p99 500–800 ms")):
        spike = dataclasses.replace(win(5, ttft_p99=1600, waiting=9), server={"queue": hist})
        (s,) = find_spikes(_with(steady(9), 5, spike))
        assert text in s["cause"], s["cause"]


def test_queue_histogram_names_queueing_when_no_scrape_saw_anyone_waiting():
    """A burst queued and drained between two scrapes: the gauge says 0 waiting, the server's queue-time
    histogram (every request) says the queue held most of the TTFT tail."""
    import dataclasses
    import math

    from telemetry.attribution.histogram import CumulativeHistogram

    long_queue = CumulativeHistogram.from_buckets({0.3: 5, 0.5: 10, 0.8: 50, math.inf: 50})  # p99 ~0.79 s
    short_queue = CumulativeHistogram.from_buckets({0.05: 45, 0.1: 50, math.inf: 50})  # p99 ~0.1 s
    for hist, category in ((long_queue, "queueing"), (short_queue, "unknown")):
        spike = dataclasses.replace(win(5, ttft_p99=1200, kv=0.4, waiting=0), server={"queue": hist})
        (s,) = find_spikes(_with(steady(9), 5, spike))
        assert s["category"] == category, s["cause"]
