"""shapes.trace and the pacer's trace slots: each process gets every workers-th line at the trace's own time
(``--trace-speedup`` faster), a line taken when already due counts as late, a spent share ends; the plan holds
the users in a warm-up twin that sends nothing until the trace's clock starts; the web UI's start form runs the
same checks."""

from __future__ import annotations

import json
import sys

import gevent
import numpy as np
import pytest
from locust.env import Environment

from shapes.pacer import Pacer
from shapes.plan import PlanError, trace_plan
from shapes.plugin import install as install_shapes
from shapes.sweep import TraceReplayShape
from shapes.trace import TRACE_TAIL_S, TraceSchedule
from tests.shapes.runners import IdleUser, runner_options
from webui.plugin import install as install_webui
from workload.trace import load_trace


@pytest.fixture
def trace_file(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps({"timestamp": 1000 + 250 * i, "input_length": 100 + i, "output_length": 4})
                            + "\n" for i in range(9)))
    return str(path)


def test_workers_share_the_lines_at_the_traces_times(trace_file):
    trace = load_trace(trace_file)
    shares = [TraceSchedule(50.0, trace, 2.0, place, 2) for place in (0, 1)]
    slots = [[s.next_slot() for _ in range(len(s))] for s in shares]
    assert [len(s) for s in slots] == [5, 4] and all(s.next_slot() is None for s in shares)
    lines = sorted((t, r.line) for share in slots for t, r in share)
    assert [line for _, line in lines] == list(range(1, 10))  # every line once, none twice
    assert [t for t, _ in lines] == pytest.approx([50.0 + 0.125 * i for i in range(9)])  # 250 ms at 2x
    assert [r.line for _, r in slots[1]] == [2, 4, 6, 8]
    assert shares[0].rate == pytest.approx(5 / (2.0 / 2.0 + TRACE_TAIL_S))


def test_pacer_takes_trace_slots_counts_late_and_unsent_then_ends(trace_file):
    now = [100.0]
    pacer = Pacer(("poisson", 1.0), np.random.default_rng(0), clock=lambda: now[0])
    pacer.start_schedule("trace", TraceSchedule(now[0], load_trace(trace_file), 1.0))
    t, line = pacer.take()
    assert (t, line.line, line.input_length) == (100.0, 1, 100)  # due now: late
    now[0] = 100.1
    t, line = pacer.take()
    assert t == pytest.approx(100.25) and line.line == 2  # ahead of time: not late
    now[0] = 101.3  # lines 3-6 (100.5 .. 101.25) are due
    assert [pacer.take()[1].line for _ in range(2)] == [3, 4]
    pacer.stop()  # lines 5 and 6 were due and never taken; 7-9 were not due yet but the stage is over
    assert pacer.take_stats() == {"trace": {"scheduled": 4, "late": 3, "unsent": 5}}


def test_a_spent_share_returns_none(trace_file):
    pacer = Pacer(("poisson", 1.0), np.random.default_rng(0), clock=lambda: 1e9)
    pacer.start_schedule("trace", TraceSchedule(0.0, load_trace(trace_file), 1.0, place=1, workers=5))
    assert [pacer.take()[1].line for _ in range(2)] == [2, 7]
    assert pacer.take() is None


def test_plan_is_a_held_warmup_then_the_trace(trace_file):
    (step,) = trace_plan(runner_options(trace=trace_file, trace_speedup="4", max_concurrency="3"))
    assert (step.stage.name, step.stage.trace_speedup, step.stage.trace_lines, step.users) == ("trace", 4.0, 9, 3)
    assert step.duration == pytest.approx(2.0 / 4 + TRACE_TAIL_S)
    assert step.stage.rate == pytest.approx(9 / step.duration)
    hold = step.warmup_stage
    assert hold is not None and hold.warmup and hold.rate is None and hold.trace_speedup == 4.0


def test_plan_names_the_option_it_cannot_use(tmp_path, trace_file):
    with pytest.raises(PlanError, match="--trace is required"):
        trace_plan(runner_options())
    with pytest.raises(PlanError, match=r"--trace: .*absent\.jsonl"):
        trace_plan(runner_options(trace=str(tmp_path / "absent.jsonl")))
    with pytest.raises(PlanError, match="--trace-speedup"):
        trace_plan(runner_options(trace=trace_file, trace_speedup="0"))


def test_web_start_form_refuses_a_bad_trace_and_replays_a_good_one(monkeypatch, tmp_path, trace_file):
    monkeypatch.setattr(sys, "argv", ["locust"])
    env = Environment(user_classes=[IdleUser], parsed_options=runner_options(headless=False))
    env.create_local_runner()
    env.create_web_ui("127.0.0.1", 0, delayed_start=True)
    install_shapes(env)
    install_webui(env)
    client = env.web_ui.app.test_client()
    base = {"user_count": "3", "spawn_rate": "50", "host": "http://127.0.0.1:1", "shape": "trace-replay"}
    try:
        bad = tmp_path / "bad.jsonl"
        bad.write_text('{"timestamp": 0, "input_length": 8, "output_length": 1, "hash_ids": [1, 2]}\n')
        r = client.post("/swarm", data={**base, "trace": str(bad)}).get_json()
        assert r["success"] is False and f"{bad}:1: 2 hash_ids for input_length 8" in r["message"], r
        r = client.post("/swarm", data={**base, "trace": trace_file, "max_concurrency": "2"}).get_json()
        assert r["success"], r
        assert isinstance(env.shape_class, TraceReplayShape)
        for _ in range(100):  # the warm-up twin holds until both users run, then the trace's clock starts
            if env.llm.stage_board.current.name == "trace":
                break
            gevent.sleep(0.05)
        pacer = env.llm.pacer
        assert env.llm.stage_board.current.name == "trace" and pacer is not None and pacer.replaying
        assert pacer.stage == "trace" and pacer.rate == pytest.approx(9 / (2.0 + TRACE_TAIL_S))
    finally:
        env.runner.quit()
