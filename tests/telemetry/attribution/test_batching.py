"""The dynamic-batching failure rule over synthetic window sequences."""

from __future__ import annotations

from telemetry.attribution.batching import BatchingRule, detect
from tests.telemetry.attribution.helpers import steady, win


def _collapse(start: int, n: int, ttft: float = 900.0, running: float = 2.0):
    return [win(i, ttft_p99=ttft, running=running) for i in range(start, start + n)]


def test_three_consecutive_flagged_windows_give_the_verdict():
    ws = steady(4) + _collapse(4, 3)
    r = detect(ws)
    assert r["verdict"] is True
    assert r["flagged_windows"] == [4, 5, 6]
    assert r["failed_at_s"] == 40.0
    assert r["baseline"]["windows"] == [0, 1, 2]
    assert r["baseline"]["batch_size_median"] == 16.0


def test_two_flagged_windows_are_not_enough():
    ws = steady(4) + _collapse(4, 2) + steady(2)
    ws = [win(i, w.metric("ttft_p99_ms"), w.running_median) for i, w in enumerate(ws)]
    r = detect(ws)
    assert r["flagged_windows"] == [4, 5]
    assert r["verdict"] is False


def test_interrupted_streak_does_not_count():
    ws = steady(3) + _collapse(3, 2) + [win(5)] + _collapse(6, 2)
    r = detect(ws)
    assert r["flagged_windows"] == [3, 4, 6, 7]
    assert r["verdict"] is False


def test_a_window_without_data_breaks_the_streak():
    ws = steady(3) + _collapse(3, 2) + [win(5, ttft_p99=None, requests=0)] + _collapse(6, 1)
    assert detect(ws)["verdict"] is False


def test_both_conditions_are_needed():
    # seed table: network jitter +28 % with batch ratio 0.52 -> no
    jitter = steady(3) + [win(i, ttft_p99=400 * 1.28, running=16 * 0.52) for i in range(3, 8)]
    assert detect(jitter)["flagged_windows"] == []
    # latency up, batch intact (e.g. longer prompts) -> no
    slow = steady(3) + [win(i, ttft_p99=2000, running=16) for i in range(3, 8)]
    assert detect(slow)["flagged_windows"] == []
    # batch shrank but latency fine (load dropped) -> no
    idle = steady(3) + [win(i, ttft_p99=380, running=2) for i in range(3, 8)]
    assert detect(idle)["flagged_windows"] == []
    # seed table: GC stop-the-world +73 % with ratio 0.21 -> yes
    gc = steady(3) + [win(i, ttft_p99=400 * 1.73, running=16 * 0.21) for i in range(3, 6)]
    assert detect(gc)["verdict"] is True


def test_thresholds_sit_on_the_boundaries():
    # exactly +40 % counts (>=); exactly 35 % does not (<)
    at_rise = steady(3) + [win(i, ttft_p99=560.0, running=5.0) for i in range(3, 6)]
    assert detect(at_rise)["verdict"] is True
    at_ratio = steady(3) + [win(i, ttft_p99=900.0, running=16 * 0.35) for i in range(3, 6)]
    assert detect(at_ratio)["verdict"] is False


def test_thresholds_are_parameters():
    ws = steady(3) + [win(i, ttft_p99=520.0, running=8.0) for i in range(3, 5)]
    assert detect(ws)["verdict"] is False
    loose = BatchingRule(p99_rise=0.2, size_ratio=0.6, consecutive=2)
    r = detect(ws, loose)
    assert r["verdict"] is True and r["flagged_windows"] == [3, 4]


def test_steady_run_is_negative():
    import numpy as np

    rng = np.random.default_rng(7)
    ws = [win(i, ttft_p99=float(400 * rng.uniform(0.8, 1.3)), running=float(rng.integers(12, 17))) for i in range(30)]
    r = detect(ws)
    assert r["verdict"] is False and r["flagged_windows"] == []


def test_baseline_skips_idle_windows_and_uses_medians():
    # two idle windows first; the ramp-up window is slow and small: the median keeps it from setting the baseline
    ws = [win(0, ttft_p99=None, requests=0, running=0), win(1, ttft_p99=None, requests=0, running=0),
          win(2, ttft_p99=1500, running=3), win(3), win(4)] + _collapse(5, 3)
    r = detect(ws)
    assert r["baseline"]["windows"] == [2, 3, 4]
    assert r["baseline"]["p99_ms"] == 400 and r["baseline"]["batch_size_median"] == 16
    assert r["verdict"] is True


def test_without_server_metrics_there_is_no_baseline():
    ws = [win(i, running=None) for i in range(6)]
    r = detect(ws)
    assert r["baseline"] is None and r["verdict"] is False
