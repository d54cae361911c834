"""shapes.saturation.verdict on synthetic stage lists."""

from __future__ import annotations

from shapes.saturation import over_saturated, verdict


def _stage(name, out, p99, users=None, rate=None, requests=100, **kw):
    return {"name": name, "users": users, "rate": rate, "output_per_s": out, "ttft_ms": {"p99": p99},
            "requests": requests, **kw}


def test_first_flat_stage_with_growing_ttft_is_named():
    stages = [
        _stage("users=1", 100, 50, users=1),
        _stage("users=4", 380, 60, users=4),
        _stage("users=16", 1400, 120, users=16),
        _stage("users=32", 1450, 400, users=32),  # +3.6%, TTFT up: saturated here
        _stage("users=64", 1460, 900, users=64),
    ]
    v = verdict(stages)
    assert v["stage"] == "users=32"
    assert "+3.6%" in v["reason"] and "120 -> 400" in v["reason"]


def test_flat_throughput_but_falling_ttft_is_not_saturation():
    stages = [_stage("users=1", 100, 50, users=1), _stage("users=2", 102, 40, users=2)]
    assert verdict(stages)["stage"] is None


def test_growing_throughput_is_not_saturated():
    stages = [_stage(f"rate={r}", 100 * r, 50 + r, rate=r, users=64) for r in (1, 2, 4)]
    v = verdict(stages)
    assert v["stage"] is None and v["reason"].startswith("not saturated")


def test_boundary_exactly_five_percent_is_not_saturated():
    stages = [_stage("users=1", 100, 50, users=1), _stage("users=2", 105, 60, users=2)]
    assert verdict(stages)["stage"] is None
    stages[1]["output_per_s"] = 104.9
    assert verdict(stages)["stage"] == "users=2"


def test_warmups_and_empty_stages_are_skipped():
    stages = [
        _stage("users=1", 100, 50, users=1),
        _stage("warmup users=4", 10, 999, users=4, warmup=True),
        _stage("users=4", 101, 80, users=4),
        _stage("users=8", 0, 0, users=8, requests=0),
    ]
    assert verdict(stages)["stage"] == "users=4"


def test_length_sweep_has_no_verdict():
    stages = [_stage("len=a", 100, 50, users=16), _stage("len=b", 100, 90, users=16)]
    v = verdict(stages)
    assert v["stage"] is None and "not a concurrency or rate sweep" in v["reason"]


def test_too_few_stages():
    assert verdict([])["stage"] is None
    assert "needs two" in verdict([_stage("users=1", 1, 1, users=1)])["reason"]


def _win(i: int, out: float, ttft: float, requests: int = 6) -> dict:
    return {"start_s": 10.0 + i, "end_s": 11.0 + i, "requests": requests, "output_per_s": out, "ttft_p50_ms": ttft}


def test_a_stage_whose_ttft_climbs_at_flat_output_is_over_saturated():
    why = over_saturated([_win(0, 400, 50), _win(1, 410, 90), _win(2, 405, 160)])
    assert why is not None and "+1.2%" in why and "50 -> 90 -> 160 ms" in why


def test_a_queue_already_deep_climbs_by_seconds_per_second():
    """Measured on the simulator (3 seats, 8 req/s): TTFT p50 15.3 -> 16.5 -> 16.5 s is +8 %, but 0.59 s/s."""
    rows = [_win(0, 466, 15333, requests=5), _win(1, 280, 16502, requests=3), _win(2, 280, 16547, requests=3)]
    why = over_saturated(rows)
    assert why is not None and "(+0.61 s/s)" in why
    steady = [_win(0, 466, 15333), _win(1, 466, 15400), _win(2, 466, 15500)]  # +0.08 s/s, +1 %: noise
    assert over_saturated(steady) is None


def test_one_request_more_in_a_short_window_is_counting_not_growth():
    """4 then 5 requests of 128 tokens in 1.3 s windows: +25 %, but one request of the first window is 25 %."""
    why = over_saturated([_win(0, 394, 900, requests=4), _win(1, 394, 2100, requests=4),
                          _win(2, 492, 3300, requests=5)])
    assert why is not None and "+24.9%" in why and "< 25%" in why
    assert over_saturated([_win(0, 394, 900, requests=4), _win(1, 394, 2100), _win(2, 600, 3300)]) is None


def test_steady_or_growing_or_too_few_windows_is_not_over_saturated():
    assert over_saturated([_win(0, 400, 50), _win(1, 400, 52), _win(2, 400, 51)]) is None  # a steady queue
    assert over_saturated([_win(0, 300, 50), _win(1, 350, 90), _win(2, 400, 160)]) is None  # output still grows
    assert over_saturated([_win(0, 300, 50, requests=20), _win(1, 300, 90), _win(2, 330, 160)]) is None  # +10 %
    assert over_saturated([_win(0, 400, 50), _win(1, 400, 90), _win(2, 400, 70)]) is None  # TTFT not climbing
    assert over_saturated([_win(0, 400, 50), _win(1, 400, 55), _win(2, 400, 60)]) is None  # < 1.5 x the first
    assert over_saturated([_win(0, 400, 50), _win(1, 400, 160)]) is None  # two windows are no trend
    assert over_saturated([_win(0, 400, 50), _win(1, 400, 90, requests=0), _win(2, 400, 160)]) is None
