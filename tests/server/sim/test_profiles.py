"""Profiles load and validate; the reference profiles reproduce their table in virtual time (the fitting harness)."""

from __future__ import annotations

import json

import pytest

from server.sim.calibrate import closed_loop
from server.sim.profiles import ProfileError, available, load_profile, parse_profile

SEED_TABLE = {"deepseek-v2-lite-a100": (1842.0, 412.0), "deepseek-v2-a100": (956.0, 789.0)}


def test_bundled_profiles_load():
    assert {"deepseek-v2-lite-a100", "deepseek-v2-a100", "cpu-tiny"} <= set(available())
    for name in available():
        p = load_profile(name)
        assert p.engine["block_size"] == 16 and p.engine["max_model_len"] <= p.engine["num_gpu_blocks"] * 16


def test_profile_typos_are_rejected_with_the_key_named(tmp_path):
    with pytest.raises(ProfileError, match="max_num_seq"):
        parse_profile({"engine": {"max_num_seq": 4}, "cost_ms": {"base": 1, "per_prefill_token": 0,
                                                                  "per_decode_seq": 0, "per_context_token": 0}})
    with pytest.raises(ProfileError, match="per_decode_seq"):
        parse_profile({"cost_ms": {"base": 1, "per_prefill_token": 0, "per_context_token": 0}})
    bad = tmp_path / "p.json"
    bad.write_text(json.dumps({"name": "x", "colour": "red"}))
    with pytest.raises(ProfileError, match="colour"):
        load_profile(str(bad))


@pytest.mark.parametrize("name", sorted(SEED_TABLE))
def test_seed_profiles_reproduce_the_table_in_virtual_time(name):
    tok_s, p99 = SEED_TABLE[name]
    r = closed_loop(load_profile(name), users=16, input_len=512, output_len=256, duration_s=60.0,
                    client_jitter_s=0.005)
    # the fitting tolerances (10 % / 15 %)
    assert abs(r.output_tok_s / tok_s - 1) < 0.10, r
    assert abs(r.ttft_p99_ms / p99 - 1) < 0.15, r
    assert r.preemptions == 0
