"""The simulator answers questions about itself as vLLM 0.32 does: ``GET /version``, the ``/v1/models`` card and the
``vllm:cache_config_info`` sample, held to what the real CPU engine answered (``tests/contract/server_env``,
recorded by ``scripts/capture_server_env.py``), and the run record reads both the same way."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from telemetry.outputs.runrecord import CACHE_LABELS, parse_cache_config, read_server_env
from tests.server.sim.helpers import get, running_sim

HERE = Path(__file__).with_name("server_env")
REAL_VERSION = json.loads((HERE / "version.json").read_text())
REAL_MODELS = json.loads((HERE / "models.json").read_text())
REAL_CACHE = (HERE / "cache_config_info.txt").read_text()


def _labels(text: str) -> dict[str, str]:
    for fam in text_string_to_metric_families(text):
        if fam.name == "vllm:cache_config_info":
            return dict(fam.samples[0].labels)
    raise AssertionError("no vllm:cache_config_info")


def test_the_recording_is_of_vllm_0_32():
    assert REAL_VERSION["version"].startswith("0.32.")
    assert set(CACHE_LABELS) <= set(_labels(REAL_CACHE))


@pytest.mark.slow
def test_simulator_answers_like_the_real_engine():
    with running_sim("--block-size", "64", "--num-gpu-blocks", "300") as proc:
        status, body = get(proc.port, "/version")
        version = json.loads(body)
        assert status == 200 and set(version) == set(REAL_VERSION)
        assert version["version"].startswith(REAL_VERSION["version"]) and version["version"].endswith("+sim")
        _, body = get(proc.port, "/v1/models")
        card, real = json.loads(body)["data"][0], REAL_MODELS["data"][0]
        assert {"id", "object", "created", "owned_by", "root", "parent", "max_model_len"} <= set(card) & set(real)
        assert all(type(card[k]) is type(real[k]) for k in ("id", "object", "created", "owned_by", "max_model_len"))
        _, body = get(proc.port, "/metrics")
        sim_text = body.decode() if isinstance(body, bytes) else body
        ours, theirs = _labels(sim_text), _labels(REAL_CACHE)
        assert set(ours) <= set(theirs), sorted(set(ours) - set(theirs))  # no label vLLM does not export
        assert set(CACHE_LABELS) <= set(ours)
        # each value reads as the real one's kind (int, float, bool, text) through the run record's parser
        sim_cc, real_cc = parse_cache_config(sim_text), parse_cache_config(REAL_CACHE)
        assert {k: type(sim_cc[k]) for k in CACHE_LABELS} == {k: type(real_cc[k]) for k in CACHE_LABELS}
        assert (sim_cc["block_size"], sim_cc["num_gpu_blocks"]) == (64, 300)
        assert ours["kv_cache_size_tokens"] == str(64 * 300)
        # and the run record, pointed at the simulator, finds all of it
        env = read_server_env(f"http://127.0.0.1:{proc.port}", f"http://127.0.0.1:{proc.port}/metrics")
        assert env["errors"] == {} and env["version"] == version["version"]
        assert env["cache_config"]["block_size"] == 64 and env["max_model_len"] == card["max_model_len"]


def test_real_cache_config_parses_typed():
    cc = parse_cache_config(REAL_CACHE)
    assert cc["block_size"] == int(_labels(REAL_CACHE)["block_size"])
    assert isinstance(cc["enable_prefix_caching"], bool) and isinstance(cc["gpu_memory_utilization"], float)
    assert cc["cache_dtype"] == "auto" and isinstance(cc["num_gpu_blocks"], int)
