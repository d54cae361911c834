"""Quantiles from cumulative-histogram deltas, interpolated like Prometheus' histogram_quantile."""

from __future__ import annotations

import math

import pytest

from telemetry.attribution.histogram import CumulativeHistogram

INF = math.inf


def test_delta_subtracts_bucketwise_and_sums():
    h0 = CumulativeHistogram.from_buckets({0.1: 3, 0.5: 7, INF: 8}, total_sum=2.0)
    h1 = CumulativeHistogram.from_buckets({0.1: 5, 0.5: 17, INF: 18}, total_sum=5.5)
    d = h1 - h0
    assert d.cumulative == (2, 10, 10)
    assert d.count == 10
    assert d.mean() == pytest.approx(0.35)


def test_quantile_interpolates_inside_the_bucket():
    # 10 observations: 2 in (0, 0.1], 8 in (0.1, 0.5]
    h = CumulativeHistogram.from_buckets({"0.1": 2, "0.5": 10, "+Inf": 10})
    # rank 5 lies 3/8 of the way into (0.1, 0.5]
    assert h.quantile(0.5) == pytest.approx(0.1 + 0.4 * 3 / 8)
    # first bucket interpolates from 0
    assert h.quantile(0.1) == pytest.approx(0.05)
    assert h.quantile(0.99) == pytest.approx(0.1 + 0.4 * (9.9 - 2) / 8)


def test_quantile_in_inf_bucket_gives_highest_finite_bound():
    h = CumulativeHistogram.from_buckets({0.1: 1, 0.5: 2, INF: 10})
    assert h.quantile(0.99) == 0.5


def test_skips_empty_buckets_below_the_rank():
    h = CumulativeHistogram.from_buckets({0.1: 0, 0.2: 0, 0.4: 4, INF: 4})
    assert h.quantile(0.5) == pytest.approx(0.2 + 0.2 * 0.5)


def test_empty_and_counter_reset():
    empty = CumulativeHistogram.from_buckets({0.1: 0, INF: 0})
    assert empty.quantile(0.99) is None and empty.to_q()["p99"] is None
    before = CumulativeHistogram.from_buckets({0.1: 50, INF: 60})
    after_restart = CumulativeHistogram.from_buckets({0.1: 1, INF: 2})
    assert (after_restart - before).cumulative == (1, 2)


def test_mismatched_bounds_refused():
    with pytest.raises(ValueError, match="different bucket bounds"):
        CumulativeHistogram.from_buckets({0.1: 1, INF: 1}) - CumulativeHistogram.from_buckets({0.2: 1, INF: 1})


def test_to_q_in_ms_matches_quantile():
    h = CumulativeHistogram.from_buckets({0.1: 2, 0.5: 10, INF: 10}, total_sum=2.5)
    q = h.to_q()
    assert q["count"] == 10
    assert q["mean"] == pytest.approx(250.0)
    assert q["p50"] == pytest.approx(h.quantile(0.5) * 1000)
    assert q["p90"] < q["p95"] < q["p99"] <= 500.0
    assert q["max"] is None


def test_quantile_bucket_states_what_is_known():
    # vLLM's queue-time buckets start at 0.3 s: every quick request lands in (0, 0.3]
    h = CumulativeHistogram.from_buckets({0.3: 100, 0.5: 100, INF: 100}, total_sum=0.5)
    assert h.quantile(0.99) == pytest.approx(0.297)  # Prometheus' estimate...
    assert h.quantile_bucket(0.99) == (0.0, 0.3)  # ...of a value known only to be <= 300 ms
    q = h.to_q()
    assert q["bucket"]["p99"] == [0.0, 300.0] and q["mean"] == pytest.approx(5.0)
    top = CumulativeHistogram.from_buckets({0.3: 1, 0.5: 2, INF: 10})
    assert top.quantile_bucket(0.99) == (0.5, INF) and top.to_q()["bucket"]["p99"] == [500.0, None]
