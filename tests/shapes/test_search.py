"""The capacity search as pure logic: bracket, bisect, the repeated boundary, the probe budget, the statements,
the capacity section's figures and the search shape driven by a fake judge."""

from __future__ import annotations

import argparse
import itertools
import math

import pytest

from run.context import RunContext
from shapes.plan import PlanError
from shapes.search import (
    RATE,
    USERS,
    Search,
    SloSearchShape,
    binding_slo,
    capacity,
    costs,
    search_config,
    statement,
)
from shapes.stage import StageBoard


def _run(search: Search, meets) -> Search:
    """Drive the search with ``meets(load, nth_time)`` as the probes' verdict."""
    seen: dict[float, int] = {}
    while (load := search.next_load()) is not None:
        seen[load] = seen.get(load, 0) + 1
        search.record(load, meets(load, seen[load]))
    return search


@pytest.mark.parametrize("lo,hi", [(1, 16), (1, 64), (3, 40)])
def test_users_search_finds_every_capacity_within_one_step(lo, hi):
    budget = 2 * math.ceil(math.log2(hi - lo + 1)) + 2  # bracket + bisect + the repeat
    for cap in range(lo, hi):
        s = _run(Search(USERS, lo, hi, 1, budget), lambda load, _n, cap=cap: load <= cap)
        r = s.result()
        assert r["status"] == "found" and r["load"] == cap, (cap, s.probes)
        assert len(s.probes) <= budget
        assert [x for x, ok in s.probes].count(cap) == 2  # the boundary is probed twice


def test_users_precision_wider_than_one_stops_within_it():
    for cap in range(1, 63):
        s = _run(Search(USERS, 1, 64, 4, 20), lambda load, _n, cap=cap: load <= cap)
        r = s.result()
        assert r["status"] == "found" and cap - 4 <= r["load"] <= cap, (cap, s.probes)


def test_rate_search_ends_within_the_relative_precision():
    for cap in (0.7, 1.0, 3.3, 9.9, 17.0):
        s = _run(Search(RATE, 0.5, 32, 0.1, 16), lambda load, _n, cap=cap: load <= cap)
        r = s.result()
        assert r["status"] == "found" and r["load"] <= cap, (cap, s.probes)
        above = min(x for x, ok in s.probes if not ok)
        assert above / r["load"] - 1 <= 0.1 and above > cap


def test_a_noisy_pass_at_the_boundary_moves_it_down():
    # 6 passes the first time only (noise); the real capacity is 5
    s = _run(Search(USERS, 1, 16, 1, 12), lambda load, n: load <= 5 or (load == 6 and n == 1))
    r = s.result()
    assert r == {"status": "found", "load": 5, "confirmed": True}, s.probes


def test_no_load_meets_and_the_largest_allowed_meets():
    none = _run(Search(USERS, 2, 16, 1, 12), lambda load, _n: False)
    assert none.result()["status"] == "none" and none.result()["load"] is None and len(none.probes) == 1
    top = _run(Search(USERS, 1, 8, 1, 12), lambda load, _n: True)
    assert top.result() == {"status": "max_allowed", "load": 8, "confirmed": True}
    assert [x for x, _ in top.probes] == [1, 2, 4, 8, 8]


def test_the_probe_budget_bounds_the_search_and_says_so():
    s = _run(Search(USERS, 1, 64, 1, 4), lambda load, _n: load <= 20)
    assert len(s.probes) == 4 and s.result() == {"status": "incomplete", "load": 8, "confirmed": False}
    cfg = search_config(_options(search_users="1:64", search_max_probes="4"))
    assert statement(cfg, s.result(), []).startswith("probes ran out (--search-max-probes 4) before the boundary")


def _options(**kw):
    base = {"search_users": None, "search_rate": None, "search_precision": None, "search_max_probes": "12",
            "arrival": "poisson", "max_concurrency": "64", "stage_duration": "3", "stage_warmup": "1",
            "spawn_rate": 10, "gpus": None, "gpu_hour_price": None}
    return argparse.Namespace(**(base | kw))


def test_config_refuses_bad_or_missing_ranges_naming_the_option():
    with pytest.raises(PlanError, match="exactly one of --search-users"):
        search_config(_options())
    with pytest.raises(PlanError, match="exactly one of --search-users"):
        search_config(_options(search_users="1:4", search_rate="1:4"))
    with pytest.raises(PlanError, match="--search-users: '8:2': LO must be below HI"):
        search_config(_options(search_users="8:2"))
    with pytest.raises(PlanError, match="--search-rate: 'x' is not LO:HI"):
        search_config(_options(search_rate="x"))
    with pytest.raises(PlanError, match="--search-max-probes"):
        search_config(_options(search_users="1:4", search_max_probes="1"))
    rate = search_config(_options(search_rate="0.5:8"))
    assert rate.axis == RATE and rate.precision == 0.1 and rate.pool == 64
    step = rate.step(2.5, 3)
    assert step.stage.name == "probe 3 rate=2.5" and step.stage.rate == 2.5 and step.users == 64
    assert step.warmup_stage.warmup and step.warmup_stage.index == 4 and step.stage.index == 5


def test_cost_figures_from_tokens_per_second_gpus_and_price():
    c = costs(1000.0, _options(gpus="4", gpu_hour_price="2.5"))
    # 4 GPUs x 2.5 $/h = 10 $/h for 3.6 M output tokens per hour
    assert c["output_per_s_per_gpu"] == 250.0 and c["usd_per_million_output_tokens"] == pytest.approx(10 / 3.6)
    assert costs(1000.0, _options())["usd_per_million_output_tokens"] is None


def test_binding_slo_is_the_closest_to_its_threshold():
    row = {"checks": [{"name": "ttft_p99_ms", "threshold": 500, "value": 400, "passed": True},
                      {"name": "itl_p95_ms", "threshold": 50, "value": 45, "passed": True},
                      {"name": "error_rate", "threshold": 0.01, "value": 0.0, "passed": True}]}
    assert binding_slo(row)["name"] == "itl_p95_ms" and binding_slo(row)["value"] == 45


def test_statements_are_plain_and_invent_no_number():
    cfg = search_config(_options(search_users="2:16"))
    rows = [{"load": 2.0, "passed": False, "requests": 9, "early_stop": None,
             "checks": [{"name": "ttft_p99_ms", "threshold": 100.0, "value": 420.0, "passed": False}]}]
    text = statement(cfg, {"status": "none", "load": None, "confirmed": False}, rows)
    assert text == "no load in --search-users 2:16 meets the SLOs: the lowest, users=2, breached ttft_p99_ms 420 > 100"
    section = capacity(cfg, {"status": "none", "load": None, "confirmed": False}, rows, _options())
    assert section["users"] is None and section["output_per_s"] is None and section["binding_slo"] is None
    top = statement(cfg, {"status": "max_allowed", "load": 16.0, "confirmed": True}, [])
    assert "the largest allowed load, users=16, still meets every SLO" in top


class _Runner:
    def __init__(self, environment):
        self.environment = environment
        self.user_count = 0


class _Env:
    def __init__(self, options):
        self.parsed_options = options
        self.llm = RunContext(stage_board=StageBoard())


def test_the_shape_follows_the_judges_verdicts_to_the_capacity():
    """A fake clock and a judge that passes up to 5 users: the shape walks probes 1, 2, 4, 8, 6, 5, 5."""
    env = _Env(_options(search_users="1:16", stage_duration="3", stage_warmup="1"))
    now = itertools.count(0.0, 0.5)
    shape = SloSearchShape(clock=lambda: next(now))
    shape.runner = _Runner(env)
    stage_users = {}

    def judge(stage, until_wall, windows=0):
        users = stage_users[stage]
        value = 50.0 if users <= 5 else 900.0
        return {"complete": True, "passed": value <= 200, "requests": 20, "errors": 0, "goodput_rps": users,
                "output_per_s": 100.0 * users, "span_s": 3.0,
                "checks": [{"name": "ttft_p99_ms", "threshold": 200.0, "value": value, "passed": value <= 200}]}

    env.llm.stage_board.judge = judge
    asked = []
    for _ in range(1000):
        step = shape.current_step
        if step is not None:
            stage_users[step.stage.name] = step.users
        out = shape.tick()
        if out is None:
            break
        shape.runner.user_count = out[0]
        if not asked or asked[-1] != out[0]:
            asked.append(out[0])
    else:
        pytest.fail("the search did not end")
    assert [p["load"] for p in shape.record] == [1, 2, 4, 8, 6, 5, 5]
    early = [p for p in shape.record if p["early_stop"]]
    assert {p["load"] for p in early} == {8, 6}  # 900 ms > 1.5 x 200 ms: stopped before the hold's end
    assert {p["early_stop"]["why"] for p in early} == {"slo_breach"}
    section = shape.capacity(env.parsed_options)
    assert section["status"] == "found" and section["users"] == 5 and section["output_per_s"] == 500.0
    assert env.llm.stage_board.closed_at is not None


def test_an_over_saturated_probe_stops_early_and_says_why():
    """Past 5 users the judge's p99 is only just over the threshold (no clear breach), but the probe's trailing
    windows show output flat while TTFT p50 climbs: the probe stops early as over-saturated and fails."""
    env = _Env(_options(search_users="4:8", stage_duration="30", stage_warmup="1"))
    now = itertools.count(0.0, 0.5)
    shape = SloSearchShape(clock=lambda: next(now))
    shape.runner = _Runner(env)
    stage_users, asked_windows = {}, []

    def judge(stage, until_wall, windows=0):
        users = stage_users[stage]
        over = users > 5
        asked_windows.append(windows)
        rows = [{"start_s": 10.0 + i, "end_s": 11.0 + i, "requests": 8, "output_per_s": 500.0,
                 "ttft_p50_ms": (60.0 * 2 ** i) if over else 60.0} for i in range(windows)]
        value = 210.0 if over else 50.0
        return {"complete": True, "passed": not over, "requests": 20, "errors": 0, "goodput_rps": users,
                "output_per_s": 100.0 * users, "span_s": 3.0, "windows": rows,
                "checks": [{"name": "ttft_p99_ms", "threshold": 200.0, "value": value, "passed": not over}]}

    env.llm.stage_board.judge = judge
    for _ in range(1000):
        step = shape.current_step
        if step is not None:
            stage_users[step.stage.name] = step.users
        out = shape.tick()
        if out is None:
            break
        shape.runner.user_count = out[0]
    else:
        pytest.fail("the search did not end")
    assert [p["load"] for p in shape.record] == [4, 8, 6, 5, 5]
    early = {p["load"]: p["early_stop"] for p in shape.record if p["early_stop"]}
    assert set(early) == {8, 6} and all(e["why"] == "over_saturated" and e["at_s"] < 30 for e in early.values())
    assert "TTFT p50 climbed 60 -> 120 -> 240 ms" in early[8]["reason"] and len(early[8]["windows"]) == 3
    assert 3 in asked_windows  # the shape asked for the trailing windows of the rule
    section = shape.capacity(env.parsed_options)
    assert section["status"] == "found" and section["users"] == 5
    assert "over-saturated" in section["statement"] and "(stopped early)" in section["statement"]
