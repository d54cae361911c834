"""shapes.plan: the steps each sweep walks, from parsed options."""

from __future__ import annotations

from argparse import Namespace

import pytest

from shapes.plan import PlanError, concurrency_plan, length_plan, rate_plan


def _opts(**kw):
    base = dict(stage_duration="30", stage_warmup="0", spawn_rate=4.0, num_users=16, arrival="poisson",
                max_concurrency="64", sweep_users=None, length_sweep=None, request_rate=None)
    return Namespace(**{**base, **kw})


def test_concurrency_plan_stages_and_indices():
    steps = concurrency_plan(_opts(sweep_users="1,4,16"))
    assert [s.stage.name for s in steps] == ["users=1", "users=4", "users=16"]
    assert [s.users for s in steps] == [1, 4, 16]
    assert all(s.duration == 30 and s.spawn_rate == 4.0 for s in steps)
    # --stage-warmup 0: no warm-up stage, not even for a ramp; the ramp's requests count in the level they ramp to
    assert all(s.warmup_stage is None and not s.stage.warmup for s in steps)
    assert [s.stage.index for s in steps] == [0, 1, 2]
    steps = concurrency_plan(_opts(sweep_users="1,4", stage_warmup="2"))
    assert [i for s in steps for i in (s.warmup_stage.index, s.stage.index)] == list(range(4))


def test_length_plan_uses_fixed_users_and_specs():
    steps = length_plan(_opts(length_sweep="uniform:128:1024,zipf:1.2:16:4096", num_users=16))
    assert [(s.stage.name, s.stage.input_len, s.users) for s in steps] == [
        ("len=uniform:128:1024", "uniform:128:1024", 16),
        ("len=zipf:1.2:16:4096", "zipf:1.2:16:4096", 16),
    ]
    # without --stage-warmup no stage has a warm-up twin, the first (which ramps) neither
    assert steps[0].warmup_stage is None and steps[1].warmup_stage is None


def test_stage_warmup_gives_every_stage_a_warmup():
    steps = length_plan(_opts(length_sweep="fixed:64,fixed:128", stage_warmup="5"))
    assert [s.warmup_stage.name for s in steps] == ["warmup len=fixed:64", "warmup len=fixed:128"]
    assert all(s.warmup == 5 for s in steps)
    assert steps[1].warmup_stage.input_len == "fixed:128"


def test_rate_plan_pool_and_rates():
    steps = rate_plan(_opts(request_rate="2,4.5", max_concurrency="64"))
    assert [(s.stage.name, s.stage.rate, s.users, s.spawn_rate) for s in steps] == [
        ("rate=2", 2.0, 64, 64.0),
        ("rate=4.5", 4.5, 64, 64.0),
    ]
    # the open loop's pool spawns in the first stage's twin (its pacer must not pile slots up meanwhile), only there
    assert steps[0].warmup_stage.rate == 2.0 and steps[1].warmup_stage is None


@pytest.mark.parametrize(
    "build,kw,msg",
    [
        (concurrency_plan, {}, "--sweep-users is required"),
        (length_plan, {}, "--length-sweep is required"),
        (rate_plan, {}, "--request-rate is required"),
        (concurrency_plan, {"sweep_users": "1,x"}, "--sweep-users"),
        (rate_plan, {"request_rate": "4", "arrival": "gamma:0"}, "--arrival"),
        (rate_plan, {"request_rate": "4", "max_concurrency": "x"}, "--max-concurrency"),
        (concurrency_plan, {"sweep_users": "1", "stage_duration": "0"}, "--stage-duration"),
        (concurrency_plan, {"sweep_users": "1", "spawn_rate": 0}, "--spawn-rate"),
    ],
)
def test_plan_errors_name_the_option(build, kw, msg):
    with pytest.raises(PlanError, match=msg):
        build(_opts(**kw))


def test_length_plan_bad_user_count():
    with pytest.raises(PlanError, match="-u/--users"):
        length_plan(_opts(length_sweep="fixed:8", num_users="abc"))
