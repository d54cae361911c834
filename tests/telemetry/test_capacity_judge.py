"""The capacity search's judge: the SLO checks of one stage's requests, the error-rate objective it adds, and
whether every process has reported past a time."""

from __future__ import annotations

import math
import time

from shapes.saturation import over_saturated
from shapes.stage import Stage
from tests.telemetry.helpers import fire, local_env
from tests.telemetry.synthetic import make_result


def test_the_judge_checks_one_stage_and_knows_when_its_data_is_in():
    env, hub, role = local_env(slo_ttft_p99_ms=200.0)
    role.merger.configure(env.parsed_options)
    role.merger.start_run()
    board = env.llm.stage_board
    assert board.judge is not None  # the summarizing role put it there
    board.set(Stage("probe 1 users=2", index=1, users=2))
    for _ in range(20):
        fire(env, make_result(ttft=0.05, stage="probe 1 users=2"))
    board.set(Stage("probe 2 users=4", index=3, users=4))
    for i in range(20):
        fire(env, make_result(ttft=0.5 if i % 4 == 0 else 0.05, stage="probe 2 users=4",
                              ok=i != 1, error_kind=None if i != 1 else "http_5xx"))
    later = time.time() + 60
    assert board.judge("probe 1 users=2", later)["complete"] is False  # nothing reported yet
    role.pump_local()
    good = board.judge("probe 1 users=2", time.time() - 0.5)
    assert good["complete"] and good["passed"] and good["requests"] == 20 and good["errors"] == 0
    assert {c["name"] for c in good["checks"]} == {"ttft_p99_ms", "error_rate"}  # the error rate always counts
    bad = board.judge("probe 2 users=4", None)
    checks = {c["name"]: c for c in bad["checks"]}
    assert not bad["passed"] and bad["errors"] == 1
    assert checks["ttft_p99_ms"]["value"] > 200 and not checks["ttft_p99_ms"]["passed"]
    assert checks["error_rate"]["value"] == 1 / 20 and not checks["error_rate"]["passed"]  # > 1 % by default
    assert board.judge("probe 9 users=9", None)["passed"] is False  # no requests: no pass


def _held_stage(ttfts: list[float]) -> dict:
    """A local run whose one stage ran the 6 whole wall-clock seconds (recorder slots) from 7 s ago, one request
    ending in each second with these TTFTs: the judge's verdict with three windows of the stage."""
    env, _hub, role = local_env(slo_ttft_p99_ms=5000.0)
    role.merger.configure(env.parsed_options)
    role.merger.start_run()
    base = math.floor(time.time()) - 7.0  # on the slot grid: the windows are 2 whole slots each
    role.merger.t0_wall = base - 1.0
    board = env.llm.stage_board
    board.set(Stage("probe 1 rate=8", index=1, users=4, rate=8))
    st, _wall, perf = board.history[-1]
    board.history[-1] = (st, base, perf)
    board.closed_at = (base + 6.0, perf)
    wall_to_perf = time.perf_counter() - time.time()
    for k, ttft in enumerate(ttfts):
        fire(env, make_result(ttft=ttft, stage="probe 1 rate=8", end=base + 0.5 + k + wall_to_perf))
    role.pump_local()
    assert board.judge("probe 1 rate=8", None)["windows"] == []  # not asked for
    return board.judge("probe 1 rate=8", None, windows=3)


def test_the_judges_windows_show_a_queue_growing_inside_one_stage():
    """The trailing windows the over-saturation rule reads: requests ending at a steady token rate while their TTFT
    doubles every 2 s read as over-saturated; the same at a steady TTFT do not."""
    over = _held_stage([0.05, 0.05, 0.1, 0.1, 0.2, 0.2])
    assert [w["requests"] for w in over["windows"]] == [2, 2, 2]
    assert [round(w["ttft_p50_ms"]) for w in over["windows"]] == [50, 100, 200]
    assert over_saturated(over["windows"]) is not None
    assert over_saturated(_held_stage([0.05] * 6)["windows"]) is None
