"""The capacity search's judge: the SLO checks of one stage's requests, the error-rate objective it adds, and
whether every process has reported past a time."""

from __future__ import annotations

import time

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
