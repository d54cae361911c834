"""shapes.arrival: mean rate and CV of each arrival process for a fixed seed; absolute schedule."""

from __future__ import annotations

import numpy as np
import pytest

from shapes.arrival import Schedule


def _times(arrival, rate=5.0, n=20_000, seed=7):
    s = Schedule(origin=100.0, rate=rate, arrival=arrival, rng=np.random.default_rng(seed))
    return np.array([s.next() for _ in range(n)])


@pytest.mark.parametrize("arrival,cv", [(("poisson", 1.0), 1.0), (("constant", 0.0), 0.0), (("gamma", 0.5), 0.5),
                                        (("gamma", 2.0), 2.0)])
def test_rate_and_cv(arrival, cv):
    t = _times(arrival)
    gaps = np.diff(t)
    assert t[0] > 100.0
    assert len(t) / (t[-1] - 100.0) == pytest.approx(5.0, rel=0.03)
    assert gaps.std() / gaps.mean() == pytest.approx(cv, abs=0.05)


def test_same_seed_same_schedule_other_seed_differs():
    assert np.array_equal(_times(("poisson", 1.0), n=50, seed=3), _times(("poisson", 1.0), n=50, seed=3))
    assert not np.array_equal(_times(("poisson", 1.0), n=50, seed=3), _times(("poisson", 1.0), n=50, seed=4))


def test_phase_shifts_constant_senders():
    a = Schedule(0.0, 2.0, ("constant", 0.0), np.random.default_rng(0), phase=0.0)
    b = Schedule(0.0, 2.0, ("constant", 0.0), np.random.default_rng(0), phase=0.5)
    assert (a.next(), b.next(), a.next(), b.next()) == (0.5, 0.75, 1.0, 1.25)


def test_set_rate_changes_later_gaps_only():
    s = Schedule(0.0, 1.0, ("constant", 0.0), np.random.default_rng(0))
    assert s.next() == 1.0  # the following time (2.0) was already drawn at rate 1
    s.set_rate(4.0)
    assert [s.next() for _ in range(3)] == [2.0, 2.25, 2.5]


def test_count_before_consumes_missed_slots():
    s = Schedule(0.0, 10.0, ("constant", 0.0), np.random.default_rng(0))
    assert s.count_before(1.05) == 10  # 0.1 .. 1.0
    assert s.peek() == pytest.approx(1.1)


def test_bad_rate():
    with pytest.raises(ValueError, match=r"rate must be > 0, got 0\.0"):
        Schedule(0.0, 0.0, ("poisson", 1.0), np.random.default_rng(0))
