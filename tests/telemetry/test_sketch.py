"""LogSketch: quantiles within 1 % of numpy, merge equals the union, exact count/sum/min/max, plain-data round trip."""

from __future__ import annotations

import math

import msgpack
import numpy as np
import pytest

from telemetry.measure.sketch import MAX_VALUE, MIN_VALUE, LogSketch

QS = (0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999)


def _data(rng: np.random.Generator, kind: str, n: int) -> np.ndarray:
    return {
        "lognormal": lambda: rng.lognormal(np.log(0.02), 1.0, n),
        "uniform": lambda: rng.uniform(0.001, 5.0, n),
        "bimodal": lambda: np.concatenate(
            [rng.normal(0.015, 0.001, 2 * n // 5), rng.normal(0.4, 0.05, n - 2 * n // 5)]
        ),
        "pareto": lambda: 0.005 * (1 + rng.pareto(1.5, n)),
    }[kind]()


@pytest.mark.parametrize("kind", ["lognormal", "uniform", "bimodal", "pareto"])
def test_quantiles_within_one_percent_of_numpy(kind):
    rng = np.random.default_rng(7)
    v = np.abs(_data(rng, kind, 50_000))
    s = LogSketch()
    s.add_many(v)
    for q in QS:
        exact = np.quantile(v, q, method="lower")
        got = s.quantile(q)
        assert abs(got - exact) <= 0.01 * exact, (kind, q, got, exact)
        linear = np.quantile(v, q)
        assert abs(got - linear) <= 0.01 * linear, (kind, q, got, linear)


def test_exact_count_sum_min_max_and_extremes():
    rng = np.random.default_rng(1)
    v = rng.lognormal(-3, 0.5, 10_001)
    s = LogSketch()
    s.add_many(v[:5000])
    for x in v[5000:5010]:
        s.add(x)  # scalar path gives the same buckets as the bulk path
    s.add_many(v[5010:])
    assert s.count == v.size
    assert math.isclose(s.sum, float(v.sum()), rel_tol=1e-12)
    assert s.min == v.min() and s.max == v.max()
    assert s.quantile(0) == v.min() and s.quantile(1) == v.max()
    assert math.isclose(s.mean, float(v.mean()), rel_tol=1e-12)


def test_scalar_and_bulk_insert_agree():
    v = np.random.default_rng(3).exponential(0.05, 2000)
    a, b = LogSketch(), LogSketch()
    a.add_many(v)
    for x in v:
        b.add(float(x))
    assert a.offset == b.offset and np.array_equal(a.counts, b.counts)


def _sketch_of(values: np.ndarray) -> LogSketch:
    s = LogSketch()
    s.add_many(values)
    return LogSketch.from_dict(msgpack.unpackb(msgpack.packb(s.to_dict())))  # as a worker ships it


def test_merge_in_any_order_equals_union_and_numpy_within_alpha():
    rng = np.random.default_rng(11)
    body = np.concatenate([rng.lognormal(np.log(x), 0.7, 3000 + 100 * i) for i, x in enumerate((0.003, 0.08, 1.5))])
    zeros = np.concatenate([np.zeros(200), rng.uniform(0.0, MIN_VALUE, 100)])  # counted as zero
    clamped = rng.uniform(1.5 * MAX_VALUE, 9 * MAX_VALUE, 250)  # into the top bucket
    data = rng.permutation(np.concatenate([body, zeros, clamped]))
    cuts = np.sort(rng.choice(np.arange(1, data.size), 9, replace=False))
    parts = [*np.split(data, cuts), np.zeros(0)]  # ten uneven parts and an empty one
    sketches = [_sketch_of(p) for p in parts]

    def merged_in(order) -> LogSketch:
        m = LogSketch()
        for i in order:
            m.merge(sketches[i])
        return m

    merged, other_order = merged_in(rng.permutation(len(parts))), merged_in(rng.permutation(len(parts)))
    union = LogSketch()
    union.add_many(data)
    for m in (merged, other_order):
        assert m.count == data.size and m.zero == zeros.size and m.min == data.min() and m.max == data.max()
        assert math.isclose(m.sum, float(data.sum()), rel_tol=1e-12)
        d, u = m.to_dict(), union.to_dict()
        assert (d["o"], d["c"], d["z"]) == (u["o"], u["c"], u["z"])  # the same buckets whatever the order
    alpha = merged.alpha  # the stated relative accuracy (DEFAULT_ALPHA, 0.5 %)
    zone = {"zero": 0, "body": 0, "clamped": 0}
    for q in (*QS, *np.linspace(0.001, 0.999, 97)):
        exact = float(np.quantile(data, q, method="lower"))  # the order statistic at rank q*(n-1)
        got = merged.quantile(q)
        assert got == union.quantile(q) == other_order.quantile(q)
        if exact <= MIN_VALUE:
            zone["zero"] += 1
            assert got == 0.0, (q, got, exact)
        elif exact > MAX_VALUE:
            zone["clamped"] += 1
            assert MAX_VALUE * (1 - alpha) <= got <= exact, (q, got, exact)
        else:
            zone["body"] += 1
            assert abs(got - exact) <= alpha * exact * (1 + 1e-9), (q, got, exact)
    assert min(zone.values()) >= 2, zone  # every branch of quantile() was exercised


def test_empty_zero_and_clamped_values():
    s = LogSketch()
    assert s.quantile(0.5) is None and s.mean is None and s.count == 0
    assert LogSketch.from_dict(s.to_dict()).count == 0
    s.add_many(np.array([0.0, 0.0, 0.0, 2 * MAX_VALUE]))
    assert s.quantile(0.5) == 0.0
    assert s.max == 2 * MAX_VALUE and s.quantile(1.0) == 2 * MAX_VALUE
    assert s.counts.size == 1  # the huge value went to the top bucket, not a giant array


def test_memory_is_bounded_whatever_the_range():
    s = LogSketch()
    s.add_many(np.geomspace(1e-9, 1e9, 100_000))
    assert s.counts.size < 3000


def test_merge_rejects_other_accuracy():
    other = LogSketch(0.01)
    other.add(1.0)
    with pytest.raises(ValueError, match=r"different accuracy \(0\.005 vs 0\.01\)"):
        LogSketch(0.005).merge(other)
