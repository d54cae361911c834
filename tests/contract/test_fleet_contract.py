"""The simulator's ``--data-parallel-size 2`` exports what ``vllm serve --data-parallel-size 2`` exports: held to
the real CPU engine's /metrics after six chat requests (``tests/contract/fleet/metrics_dp2.txt``, recorded by
``scripts/capture_fleet_metrics.py``) — every family the simulator exports exists there with the same type and the
same label names, once per engine, and the fleet parser reads both the same way."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from telemetry.measure.scraper import parse_engines
from tests.server.sim.helpers import get, post, running_sim

REAL = (Path(__file__).with_name("fleet") / "metrics_dp2.txt").read_text()


def families(text: str) -> dict[str, tuple[str, set[frozenset[str]], set[str]]]:
    """``{family: (type, label-name sets of its samples, engine values)}`` of the ``vllm:`` families."""
    out = {}
    for fam in text_string_to_metric_families(text):
        if not fam.name.startswith("vllm:"):
            continue
        labels = {frozenset(k for k in s.labels if k != "le") for s in fam.samples}
        out[fam.name] = (fam.type, labels, {s.labels.get("engine") for s in fam.samples})
    return out


def test_the_recording_has_two_engines_each_with_its_own_pool():
    engines = parse_engines(REAL)
    assert list(engines) == ["0", "1"]
    assert all(e["cache_config"]["num_gpu_blocks"].isdigit() for e in engines.values())
    # the six requests were dealt to both engines: each finished some
    assert all(e["request_success_total"] > 0 for e in engines.values())
    assert sum(e["request_success_total"] for e in engines.values()) == 6


@pytest.mark.slow
def test_simulator_fleet_exports_the_real_engines_names_and_labels():
    real = families(REAL)
    with running_sim("--data-parallel-size", "2", "--num-gpu-blocks", "300") as proc:
        body = {"model": "sim-tiny", "prompt": "hello", "max_tokens": 4}
        with ThreadPoolExecutor(6) as pool:
            assert all(r[0] == 200 for r in pool.map(lambda _i: post(proc.port, "/v1/completions", body), range(6)))
        _, text = get(proc.port, "/metrics")
        text = text.decode()
    ours = families(text)
    missing = sorted(set(ours) - set(real))
    assert missing == [], f"families vLLM does not export: {missing}"
    for name, (kind, labels, engines) in ours.items():
        assert kind == real[name][0], name
        # each of our label sets is one of vLLM's (the cache config: a subset of its labels)
        assert all(any(ls <= theirs for theirs in real[name][1]) for ls in labels), (name, labels, real[name][1])
        if name != "vllm:cache_config_info":
            assert labels <= real[name][1], (name, labels, real[name][1])
        assert engines == {"0", "1"} == real[name][2], name
    sim_engines = parse_engines(text)
    assert list(sim_engines) == ["0", "1"]
    assert [e["cache_config"]["num_gpu_blocks"] for e in sim_engines.values()] == ["300", "300"]
    assert sum(e["request_success_total"] for e in sim_engines.values()) == 6
    assert all(e["request_success_total"] > 0 for e in sim_engines.values())  # a burst is spread, not piled on one


def test_the_run_record_counts_every_engines_pool():
    from telemetry.outputs.runrecord import parse_cache_config

    cc = parse_cache_config(REAL)
    engines = parse_engines(REAL)
    assert cc["engines"] == 2
    assert cc["num_gpu_blocks_total"] == sum(int(e["cache_config"]["num_gpu_blocks"]) for e in engines.values())
    assert cc["num_gpu_blocks_total"] == 2 * cc["num_gpu_blocks"]  # two equal pools, not one of them
