"""Each sweep's tick() schedule against a fake runner and a fake clock."""

from __future__ import annotations

from shapes.sweep import SETTLE_GRACE_S, ConcurrencySweepShape, LengthSweepShape, RateSweepShape
from tests.shapes.fakes import sweep_shape


def test_concurrency_sweep_dwell_starts_when_users_are_running():
    shape, clock, runner = sweep_shape(ConcurrencySweepShape, sweep_users="1,4", stage_duration="10", stage_warmup="2")
    board = runner.environment.llm.stage_board
    assert shape.tick() == (1, 100.0)
    assert board.current.name == "warmup users=1" and board.current.warmup
    clock.t += 5  # spawning is slow: still 0 users, the stage must not start
    assert shape.tick() == (1, 100.0) and board.current.name == "warmup users=1"
    runner.user_count = 1
    clock.t += 1
    assert shape.tick() == (1, 100.0) and board.current.name == "warmup users=1"  # warm-up starts now
    clock.t += 2
    assert shape.tick() == (1, 100.0)
    assert board.current.name == "users=1" and not board.current.warmup and board.current.users == 1
    measured_start = clock.t
    clock.t += 9.9
    assert shape.tick() == (1, 100.0) and board.current.name == "users=1"
    clock.t = measured_start + 10
    assert shape.tick() == (4, 100.0) and board.current.name == "warmup users=4"
    runner.user_count = 4
    clock.t += 1
    shape.tick()
    clock.t += 2
    shape.tick()
    assert board.current.name == "users=4"
    assert board.closed_at is None
    clock.t += 10
    assert shape.tick() is None
    assert board.closed_at is not None  # the last stage's span ends here
    names = [s.name for s, _w, _p in board.history]
    assert names == ["warmup users=1", "users=1", "warmup users=4", "users=4"]


def test_stage_history_times_follow_the_board():
    shape, clock, runner = sweep_shape(ConcurrencySweepShape, sweep_users="2")
    shape.tick()
    runner.user_count = 2
    clock.t += 1
    shape.tick()
    board = runner.environment.llm.stage_board
    assert [s.name for s, *_ in board.history] == ["users=2"]  # --stage-warmup 0: the ramp is the stage's


def test_without_stage_warmup_the_ramp_counts_in_the_stage_it_ramps_to():
    shape, clock, runner = sweep_shape(ConcurrencySweepShape, sweep_users="1,16", stage_duration="6")
    board = runner.environment.llm.stage_board
    shape.tick()
    runner.user_count = 1
    clock.t += 1
    shape.tick()
    clock.t += 6
    assert shape.tick() == (16, 100.0)
    assert board.current.name == "users=16" and not board.current.warmup  # the first wave at 16 users is its own
    runner.user_count = 16
    clock.t += 1
    shape.tick()
    clock.t += 5.9
    assert shape.tick() == (16, 100.0)  # the 6 s hold counts from the ramp's end
    clock.t += 0.1
    assert shape.tick() is None
    assert [s.name for s, *_ in board.history] == ["users=1", "users=16"]


def test_length_sweep_switches_distribution_without_ramp():
    shape, clock, runner = sweep_shape(LengthSweepShape, length_sweep="uniform:128:1024,zipf:1.2:16:4096", num_users=16)
    board = runner.environment.llm.stage_board
    assert shape.tick() == (16, 100.0) and board.current.name == "len=uniform:128:1024"
    runner.user_count = 16
    clock.t += 1
    assert shape.tick() == (16, 100.0)
    assert board.current.input_len == "uniform:128:1024" and board.current.users == 16
    clock.t += 10
    assert shape.tick() == (16, 100.0)
    assert board.current.name == "len=zipf:1.2:16:4096" and board.current.input_len == "zipf:1.2:16:4096"
    clock.t += 10
    assert shape.tick() is None


def test_rate_sweep_spawns_pool_and_walks_rates():
    shape, clock, runner = sweep_shape(RateSweepShape, request_rate="2,8", max_concurrency="32")
    board = runner.environment.llm.stage_board
    assert shape.tick() == (32, 32.0)
    runner.user_count = 32
    clock.t += 1
    shape.tick()
    assert (board.current.name, board.current.rate) == ("rate=2", 2.0)
    clock.t += 10
    shape.tick()
    assert (board.current.name, board.current.rate, board.current.users) == ("rate=8", 8.0, 32)


def test_unreachable_user_count_moves_on_after_grace():
    shape, clock, runner = sweep_shape(ConcurrencySweepShape, sweep_users="10", spawn_rate=1.0, stage_warmup="1")
    shape.tick()
    runner.user_count = 7  # e.g. a worker died
    clock.t += 10 + SETTLE_GRACE_S - 1
    shape.tick()
    assert runner.environment.llm.stage_board.current.name == "warmup users=10"
    clock.t += 2
    shape.tick()
    clock.t += 1
    shape.tick()
    assert runner.environment.llm.stage_board.current.name == "users=10"


def test_bad_plan_stops_the_test_instead_of_raising():
    shape, _clock, _runner = sweep_shape(ConcurrencySweepShape, sweep_users=None)
    assert shape.tick() is None


def test_finish_restarts_from_the_first_stage():
    shape, clock, runner = sweep_shape(ConcurrencySweepShape, sweep_users="1,2")
    shape.tick()
    runner.user_count = 1
    clock.t += 1
    shape.tick()
    clock.t += 10
    shape.tick()
    assert runner.environment.llm.stage_board.current.name == "users=2"
    shape.finish()
    runner.user_count = 0
    assert shape.tick() == (1, 100.0)
    board = runner.environment.llm.stage_board
    assert [s.name for s, *_ in board.history] == ["users=1"]  # a new run: history starts again


def _saturating_judge(stage, _until):
    """Output tok/s grows to 4 users and is flat after, while TTFT p99 keeps climbing."""
    users = int(stage.split("=")[1])
    return {"requests": 20, "output_per_s": 100.0 * min(users, 4), "ttft_p99_ms": 50.0 * users}


def _walk(shape, runner, clock) -> list[str]:
    board = runner.environment.llm.stage_board
    measured = []
    for _ in range(200):
        out = shape.tick()
        if out is None:
            return measured
        runner.user_count = out[0]
        if not board.current.warmup and (not measured or measured[-1] != board.current.name):
            measured.append(board.current.name)
        clock.t += 1
    raise AssertionError("the sweep did not end")


def test_stop_on_saturation_ends_a_sweep_after_the_over_saturated_stage():
    shape, clock, runner = sweep_shape(ConcurrencySweepShape, sweep_users="1,2,4,8,16,32", stage_duration="3",
                                  llm_stop_on="slo,saturation")
    runner.environment.llm.stage_board.judge = _saturating_judge
    # users=8 is over-saturated (+0 % over users=4 while TTFT grows); it is judged when users=16 ends
    assert _walk(shape, runner, clock) == ["users=1", "users=2", "users=4", "users=8", "users=16"]
    assert shape.saturation_stop["stage"] == "users=8" and "TTFT p99 grew 200 -> 400 ms" in shape.saturation_stop[
        "reason"]
    assert runner.environment.llm.stage_board.closed_at is not None


def test_without_stop_on_saturation_the_sweep_runs_every_stage():
    shape, clock, runner = sweep_shape(ConcurrencySweepShape, sweep_users="1,2,4,8,16,32", stage_duration="3")
    runner.environment.llm.stage_board.judge = _saturating_judge
    assert len(_walk(shape, runner, clock)) == 6 and shape.saturation_stop is None
