"""The simulator's speculative decoding model: per draft position, the share of verify steps accepting it
(``--spec-acceptance 0.8,0.6,0.4``), drawn with the seed, counted as vLLM counts it (the engine's counters and each
request's ``acceptance_histogram``)."""

from __future__ import annotations

import numpy as np
import pytest

from server.sim.api import spec_record
from server.sim.cli import build_parser, settings_from_args
from server.sim.scheduler import Scheduler, SchedulerConfig
from tests.server.sim.sched import IDS, req

MODEL = (0.8, 0.6, 0.4)


def _run(acceptance: tuple[float, ...], seed: int, requests: int = 25, out: int = 400):
    cfg = SchedulerConfig(max_num_seqs=32, max_num_batched_tokens=4096, block_size=16, num_gpu_blocks=1024,
                          max_model_len=1024, decode_width=1 + len(acceptance), spec_acceptance=acceptance)
    s = Scheduler(cfg, IDS, np.random.default_rng(seed))
    reqs = [req(16, out) for _ in range(requests)]
    for r in reqs:
        s.add(r)
    while s.has_work():
        s.update(s.schedule())
    return s, reqs


def test_measured_acceptance_per_position_is_the_model_over_thousands_of_steps():
    s, reqs = _run(MODEL, seed=3)
    assert s.spec_drafts >= 2000, s.spec_drafts
    measured = [n / s.spec_drafts for n in s.spec_per_pos]
    assert measured == pytest.approx(list(MODEL), abs=0.03), measured
    # the engine's counters are the sums of the requests' own records, as on the real engine
    records = [spec_record(r) for r in reqs]
    assert sum(r["num_spec_steps"] for r in records) == s.spec_drafts
    assert sum(r["num_draft_tokens"] for r in records) == s.spec_draft_tokens
    assert sum(r["num_accepted_draft_tokens"] for r in records) == s.spec_accepted == sum(s.spec_per_pos)
    # each verify step emits 1 + its accepted drafts; the prefill's first token and a last step with one token
    # left (nothing to draft) are not verify steps
    assert all(r.num_output == 400 for r in reqs)
    assert 0 <= 400 * len(reqs) - (s.spec_accepted + s.spec_drafts + len(reqs)) <= len(reqs)
    print(f"\nsim acceptance per position over {s.spec_drafts} steps: "
          f"{[round(m, 3) for m in measured]} (model {list(MODEL)})")


def test_the_same_seed_draws_the_same_steps_and_another_seed_does_not():
    a, _ = _run(MODEL, seed=5, requests=4)
    b, _ = _run(MODEL, seed=5, requests=4)
    c, _ = _run(MODEL, seed=6, requests=4)
    assert a.spec_per_pos == b.spec_per_pos and a.spec_per_pos != c.spec_per_pos


@pytest.mark.parametrize(("argv", "says"), [
    (["--spec-acceptance", "0.4,0.6"], "non-increasing"),
    (["--spec-acceptance", "1.5"], "non-increasing fractions"),
    (["--speculative-config", "{not json"], "num_speculative_tokens"),
    (["--speculative-config", '{"method": "mtp"}'], "num_speculative_tokens"),
])
def test_bad_values_are_one_line(argv, says, capsys):
    with pytest.raises(SystemExit) as e:
        build_parser().parse_args(argv)
    assert e.value.code == 2 and says in capsys.readouterr().err


def test_the_acceptance_list_must_match_the_draft_count():
    from server.sim.cli import UsageError

    args = build_parser().parse_args(["--speculative-config", '{"method":"mtp","num_speculative_tokens":1}',
                                      "--spec-acceptance", "0.8,0.6"])
    with pytest.raises(UsageError, match="gives 2 positions; --speculative-config drafts 1"):
        settings_from_args(args)
    args = build_parser().parse_args(["--speculative-config", '{"method":"mtp","num_speculative_tokens":2}'])
    assert settings_from_args(args).sched.acceptance == pytest.approx((0.7, 0.49))
